"""The bad-data corpus against debounce and throttle: junk in ``debounce:<digest>`` hashes
and ``throttle:<digest>:<slot>`` keys, as any client may write them.

Every corpus member's bytes go into each field of a burst's hash (with the same bytes
waiting in the schedule set, so a field naming another entry is tried too), and into the
slot key; keys of other types come on top. Each push must go through (a job scheduled or
admitted under a jid it answers), remove no entry it did not write, and leave a burst or
slot the next push reads correctly.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk import Wurk
from django_wurk.core.features.collapse import debounce_key, digest, throttle_prefix
from tests.hostile.corpus import members
from tests.jobsapp.collapse_jobs import keyed_an_hour, pong, waits_an_hour

EXTRA = [b"", b"\xff\xfe", b"nan", b"-inf", b"1e400", b"9" * 400, b'{"jid":"x",', b"\x00", b'"',
         b"[" * 5000, b'abc","class":"Evil', b"a" * 65]  # fmt: skip


def values() -> list[bytes]:
    return [m.raw for m in members("collapse", time.time(), flavours=(False,), huge_mb=(1,))] + EXTRA


def burst_key(r: Any) -> str:
    """The burst key of ``keyed_an_hour``'s bursts (one push, read back, then cleared)."""
    keyed_an_hour.perform_async("probe")
    [member] = r.zrange("schedule", 0, -1)
    key = debounce_key(digest(json.loads(member)))
    r.delete("schedule", key)
    return key


def test_every_burst_field_survives_the_corpus(wurk: Wurk, r: Any) -> None:
    key = burst_key(r)
    problems: list[str] = []
    for field in ("member", "jid"):
        for i, value in enumerate(values()):
            r.delete("schedule", key)
            r.zadd("schedule", {value: time.time() + 10_000})  # a stranger's entry
            state = {"member": b"m", "first": repr(time.time()).encode(), "jid": b"0" * 24}
            state[field] = value
            if field == "jid":
                state["member"] = value
            r.hset(key, mapping=state)
            try:
                jid = keyed_an_hour.perform_async(f"{field}-{i}")
                again = keyed_an_hour.perform_async(f"{field}-{i}-again")
            except Exception as exc:
                problems.append(f"{field}={value[:40]!r}: push raised {exc!r}")
                continue
            entries = r.zrange("schedule", 0, -1)
            ours = [json.loads(m) for m in entries if m != value]
            if value not in entries:
                problems.append(f"{field}={value[:40]!r}: the stranger's entry was removed")
            if len(ours) != 1 or ours[0]["jid"] != jid or again != jid:
                problems.append(f"{field}={value[:40]!r}: entries {ours!r:.200}, answers {jid}, {again}")
            elif ours[0]["args"] != [f"{field}-{i}-again"]:
                problems.append(f"{field}={value[:40]!r}: the last payload did not win: {ours[0]!r:.200}")
    assert problems == []


def test_a_burst_s_first_time_survives_the_corpus(wurk: Wurk, r: Any) -> None:
    """A burst of ours whose ``first`` is junk: extended all the same, firing within its wait."""
    problems: list[str] = []
    for i, value in enumerate(values()):
        r.delete("schedule")
        burst = waits_an_hour.set(collapse_key=f"first-{i}")  # with debounce_max: ``first`` is read
        jid = burst.perform_async(i)
        [member] = r.zrange("schedule", 0, -1)
        r.hset(debounce_key(digest(json.loads(member))), "first", value)
        now = time.time()
        try:
            again = burst.perform_async(i, "again")
        except Exception as exc:
            problems.append(f"{value[:40]!r}: push raised {exc!r}")
            continue
        entries = r.zrange("schedule", 0, -1, withscores=True)
        if again != jid or len(entries) != 1 or json.loads(entries[0][0])["args"] != [i, "again"]:
            problems.append(f"{value[:40]!r}: answers {jid}, {again}; entries {entries!r:.200}")
        elif not now - 5 <= entries[0][1] <= now + 3605:
            problems.append(f"{value[:40]!r}: fires at {entries[0][1]}, not within the wait")
    assert problems == []


def test_a_burst_key_of_another_type_is_replaced(wurk: Wurk, r: Any) -> None:
    key = burst_key(r)
    for kind in ("string", "list", "set", "zset", "stream"):
        r.delete("schedule", key)
        {"string": lambda: r.set(key, "x"), "list": lambda: r.rpush(key, "x"),
         "set": lambda: r.sadd(key, "x"), "zset": lambda: r.zadd(key, {"x": 1}),
         "stream": lambda: r.xadd(key, {"x": "y"})}[kind]()  # fmt: skip
        jid = keyed_an_hour.perform_async(kind)
        assert [json.loads(m)["jid"] for m in r.zrange("schedule", 0, -1)] == [jid]
        assert r.type(key) == b"hash"


def test_every_slot_value_survives_the_corpus(wurk: Wurk, r: Any) -> None:
    first = pong.perform_async("probe")
    [raw] = r.lrange("queue:default", 0, -1)
    prefix = throttle_prefix(digest(json.loads(raw)))
    [slot] = [k for k in r.scan_iter(match=prefix + "*")]
    assert r.get(slot).decode() == first
    problems: list[str] = []
    for i, value in enumerate(values()):
        r.delete("queue:default")
        r.set(slot, value, px=100_000_000)
        try:
            jid = pong.perform_async(f"slot-{i}")
            again = pong.perform_async(f"slot-{i}-again")
        except Exception as exc:
            problems.append(f"{value[:40]!r}: push raised {exc!r}")
            continue
        queued = [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)]
        usable = (
            len(value) <= 64 and value.replace(b"-", b"").replace(b"_", b"").isalnum() and value.isascii()
        )
        if usable:  # a holder's jid, as far as anyone can tell: the push is refused with it
            if jid != value.decode() or again != jid or queued != []:
                problems.append(f"{value[:40]!r}: answers {jid}, {again}, queued {queued}")
        elif queued != [jid] or again != jid:
            problems.append(f"{value[:40]!r}: answers {jid}, {again}, queued {queued}")
    for kind in ("list", "hash"):
        r.delete(slot, "queue:default")
        r.rpush(slot, "x") if kind == "list" else r.hset(slot, "x", "y")
        jid = pong.perform_async(kind)
        if [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] != [jid]:
            problems.append(f"a {kind} at the slot key stopped the push")
    assert problems == []
