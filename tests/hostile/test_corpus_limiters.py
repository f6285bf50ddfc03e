"""The bad-data corpus against rate limiters (issue 10's general guard, for the limiters feature).

Every key a limiter reads may hold anything: ``lmtr-list`` names that are not UTF-8, not
limiter names or 100 KB long; descriptions (``lmtr:<name>``) of the wrong type, with
options that are not JSON or describe no limiter; state keys of the wrong type or with
fields that are no numbers; and a job's ``overrated`` field of any JSON type. The rules:

* ``within_limit`` never fails on such data: a key of the wrong type is started afresh
  (logged), a field that is no number reads as absent; the limit works from then on;
* the data API (``LimiterSet``) and the Limits tab list every name and never raise or 500,
  and show hostile text escaped;
* the sweep of ``lmtr-list`` removes only names whose description is gone;
* a rate-limited job with any ``overrated`` leaves exactly one trace: rescheduled (the count
  read as 0 when it is no whole number) or dead past the cap, never lost, never a failure.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk, limiter
from django_wurk.api import LimiterSet
from django_wurk.core.features.limiters import names
from tests.dashboard.conftest import url
from tests.hostile.corpus import Raw, encode, members
from tests.hostile.test_corpus_dashboard import Walker, body

XSS = "<script>window.__xss=1</script>"

#: Values for the fields of a limiter's hashes, each read by some limiter.
JUNK_NUMBERS = [b"abc", b"NaN", b"nan", b"inf", b"-inf", b"9" * 400, b"-" + b"9" * 400, b"1e400", b"",
                b"\xff\xfe", b"0x10", b" 5", b"5 ", b"1e-400", b"-0"]  # fmt: skip

#: Names in ``lmtr-list`` that no limiter may have, or that are odd but valid.
ODD_NAMES: list[bytes] = [b"\xff\xfe", b"", b"a b", b"new\nline", b"x" * 100_000, XSS.encode(),
                          b"../../etc", b"*", b"{tag}", "caf\u00e9".encode(), b"ok-name"]  # fmt: skip

#: Descriptions: (type, options) as stored.
DESCRIPTIONS: list[tuple[bytes, bytes]] = [
    (b"window", b'{"count": 1, "seconds": 60}'),
    (b"concurrent", b'{"limit": 0}'),
    (b"concurrent", b'{"limit": "2"}'),
    (b"bucket", b'{"count": 5, "interval": "fortnight"}'),
    (b"leaky", b'{"size": 1e400, "drain": 1}'),
    (b"points", b'{"initial": NaN, "refill": 1}'),
    (b"window", b"[1, 2]"),
    (b"window", b"\xff not json"),
    (b"unlimited", b"{}"),
    (XSS.encode(), ('{"x": "' + XSS + '"}').encode()),
    (b"", b""),
    (b"window", b'{"count": 1, "seconds": 60, "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
]


def load_hostile_limiters(r: Any) -> list[bytes]:
    """Hostile limiters everywhere a reader looks; returns every name put in the list."""
    listed: list[bytes] = []
    for i, name in enumerate(ODD_NAMES):
        kind, options = DESCRIPTIONS[i % len(DESCRIPTIONS)]
        r.hset(b"lmtr:" + name, mapping={b"type": kind, b"options": options})
        listed.append(name)
    for i, (kind, options) in enumerate(DESCRIPTIONS):
        name = f"desc-{i}".encode()
        r.hset(b"lmtr:" + name, mapping={b"type": kind, b"options": options})
        listed.append(name)
    # Descriptions of the wrong type, or none at all.
    r.set("lmtr:wrong-type", "a string")
    r.rpush("lmtr:a-list", "x")
    listed += [b"wrong-type", b"a-list", b"expired"]
    # Good descriptions over state of the wrong type or with junk numbers.
    for kind, options, state in [
        ("concurrent", '{"limit": 2, "lock_timeout": 30}', "lmtr-cs:"),
        ("bucket", '{"count": 2, "interval": "hour"}', "lmtr-b:"),
        ("window", '{"count": 2, "seconds": 60}', "lmtr-w:"),
        ("leaky", '{"size": 2, "drain": 60}', "lmtr-l:"),
        ("points", '{"initial": 2, "refill": 1}', "lmtr-p:"),
    ]:
        for variant in ("string", "hash", "zset-junk"):
            name = f"{kind}-{variant}"
            r.hset(f"lmtr:{name}", mapping={"type": kind, "options": options})
            key = state + name
            if variant == "string":
                r.set(key, b"\xff" * 100)
            elif variant == "hash" and state in ("lmtr-cs:", "lmtr-w:"):
                r.hset(key, "a", "b")
            elif variant == "hash":
                for n, junk in enumerate(JUNK_NUMBERS):
                    r.hset(key + f"-{n}", mapping={"level": junk, "last": junk, "points": junk,
                                                    "period": junk, "count": junk})  # fmt: skip
                r.hset(
                    key,
                    mapping={"level": b"NaN", "last": b"x", "points": b"inf", "period": b"", "count": b"z"},
                )
            else:
                r.zadd(key, {b"\xff": float("inf"), b"x": -1e300, XSS: 0})
            listed.append(name.encode())
    # Members of every corpus shape as names (odd bytes of every length).
    for member in members("limiters", time.time(), flavours=(True,), huge_mb=())[:60]:
        listed.append(member.raw)
    r.sadd("lmtr-list", *listed)
    return listed


def test_limiter_set_lists_every_hostile_limiter_and_never_raises(wurk: Wurk, r: Any) -> None:
    listed = load_hostile_limiters(r)
    limiters = LimiterSet(wurk)
    infos = list(limiters)
    assert len(infos) == len(set(listed)) == limiters.size()
    by_name = {i.name: i for i in infos}
    assert by_name["wrong-type"].error == "its description is not a hash"
    assert by_name["expired"].error == "no description (expired)"
    assert "not UTF-8" in (by_name["\ufffd\ufffd"].error or "")
    assert by_name["desc-0"].error is None and by_name["desc-0"].status is not None
    assert "holds a string" in (by_name["window-string"].error or "")
    for info in infos:
        assert info.error is not None or info.status is not None, info.name
    assert limiters.get("no-such-limiter") is None


def test_within_limit_starts_afresh_over_hostile_state_and_then_limits(wurk: Wurk, r: Any) -> None:
    load_hostile_limiters(r)
    for kind in ("concurrent", "bucket", "window", "leaky", "points"):
        for variant in ("string", "hash", "zset-junk"):
            name = f"{kind}-{variant}"
            lim: Any = {
                "concurrent": lambda n: limiter.concurrent(n, 2, wait_timeout=0),
                "bucket": lambda n: limiter.bucket(n, 2, "hour", wait_timeout=0),
                "window": lambda n: limiter.window(n, 2, 60, wait_timeout=0),
                "leaky": lambda n: limiter.leaky(n, 2, 60, wait_timeout=0),
                "points": lambda n: limiter.points(n, 2, 0.0001),
            }[kind](name)
            admitted = 0
            for _ in range(3):
                try:
                    if kind == "concurrent":
                        admitted += lim.attempt().admitted
                    else:
                        with lim.within_limit():
                            admitted += 1
                except limiter.OverLimit:
                    pass
            # Junk fields read as absent (a full balance, an empty bucket): the limit of 2 holds.
            assert admitted == 2, (name, admitted)
            assert lim.status().used == pytest.approx(2, abs=0.01), name


def test_the_sweep_removes_only_names_without_a_description(wurk: Wurk, r: Any) -> None:
    listed = load_hostile_limiters(r)
    cursor, removed = 0, 0
    while True:
        cursor, gone = names.sweep(wurk, cursor, count=16)
        removed += gone
        if cursor == 0:
            break
    left = r.smembers("lmtr-list")
    described = {n for n in listed if r.exists(b"lmtr:" + n)}
    assert left == described and removed == len(set(listed)) - len(described)


def test_the_limits_tab_answers_over_hostile_limiters(admin_client: Client, wurk: Wurk, r: Any) -> None:
    load_hostile_limiters(r)
    walker = Walker(admin_client, "limits page")
    pages = []
    for params in ["", "?page=2", "?page=3&count=100", "?count=100", "?page=-1", "?page=abc", "?q=%00",
                   "?q=%ED%A0%80", "?q=" + "x" * 300, "?q=%3Cscript", "?page=99999999999"]:  # fmt: skip
        pages.append(body(walker.get(url("limits") + params, allowed=(200,))))
    assert not walker.problems, walker.problems
    assert all(XSS not in page for page in pages)
    assert "&lt;script&gt;" in "".join(pages)
    r.delete("lmtr-list")
    r.rpush("lmtr-list", "not a set")
    assert admin_client.get(url("limits")).status_code == 200


@pytest.mark.parametrize(
    "overrated",
    [
        Raw('"abc"'),
        Raw("-1"),
        Raw("1.5"),
        Raw("[]"),
        Raw("{}"),
        Raw("true"),
        Raw("null"),
        Raw("9" * 400),
        Raw("1e400"),
        Raw('"3"'),
    ],
)
def test_a_rate_limited_job_with_any_overrated_leaves_one_trace(wurk: Wurk, r: Any, overrated: Raw) -> None:
    assert limiter.window("test-full", 1, 86_400).attempt().admitted
    raw = encode({"class": "tests.jobsapp.limiter_jobs.never_admitted", "args": [1], "jid": "a" * 24,
                  "queue": "default", "overrated": overrated})  # fmt: skip
    from django_wurk.core import wire

    try:
        payload = wire.loads(raw)
    except wire.PayloadError:
        return  # not a job a worker would run (1e400): the processor buries it, as any payload
    wurk.execute(payload)
    traces = [json.loads(m) for m in r.zrange("schedule", 0, -1)] + [
        json.loads(m) for m in r.zrange("dead", 0, -1)
    ]
    assert len(traces) == 1 and r.zcard("retry") == 0
    [trace] = traces
    if r.zcard("schedule"):
        assert trace["overrated"] == 1  # read as 0
    else:
        assert trace["error_message"] == "rate_limited: test-full"
