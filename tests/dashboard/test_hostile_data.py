"""Every page and action answers (200, 302 or 404, with words), whatever bytes sit in Redis.

The data here is what Ruby clients, other versions, hand-typed ``redis-cli`` commands or
plain corruption can leave behind: queue names no Python client would accept, timestamps
that are not numbers (or are ``-Infinity``), heartbeats with strings where numbers go,
entry addresses with negative or infinite scores, payloads nested 100,000 deep. Nothing
may turn into a 500, and nothing may reach the page unescaped.
"""

from __future__ import annotations

import base64
import html
import json
import random
import re
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import Client

from django_wurk import Config, Wurk
from django_wurk.api import DeadSet, RetrySet, parse_entry_key
from django_wurk.core import keys, wire
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.dashboard.conftest import add_process, failed, payload, push, url, write_metrics, zadd

XSS = "<script>window.__xss=1</script>"
DEEP = b'{"class":"Deep","args":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
#: Timestamps as they may be found: not numbers, not finite, out of any range.
BAD_STAMPS = [
    b"-Infinity",
    b"Infinity",
    b"NaN",
    b'"nan"',
    b'"-inf"',
    b'"abc"',
    b"1" + b"0" * 400,
    b"-1" + b"0" * 400,
    b"1e400",
    b"[1]",
    b"{}",
    b"true",
]


def said(response: HttpResponse) -> list[str]:
    storage = get_messages(response.wsgi_request)  # type: ignore[attr-defined]
    return [str(m) for m in storage._queued_messages]


def ok(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    body = response.content.decode()
    assert "<script>window" not in body, path
    return body


def strict_json(body: bytes) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(body, parse_constant=refuse)


def raw_job(stamp: bytes, n: int = 0, **fields: bytes) -> bytes:
    """A payload written by hand, so any bytes can stand where a timestamp goes."""
    extra = b"".join(b',"' + k.encode() + b'":' + v for k, v in fields.items())
    return (
        b'{"class":"app.jobs.Odd","args":[' + str(n).encode() + b'],"queue":"default",'
        b'"jid":"' + f"{n:024x}".encode() + b'","retry":true,"created_at":' + stamp
        + b',"enqueued_at":' + stamp + b',"failed_at":' + stamp + b',"retried_at":' + stamp
        + b',"error_class":"E","error_message":"m"' + extra + b"}"
    )  # fmt: skip


def all_pages(client: Client, entry_keys: dict[str, list[str]] | None = None) -> None:
    queue = client.get(url("queue", name="default"))
    assert queue.status_code == 200 or "No queue named" in queue.content.decode()
    for path in (
        url("changelist"),
        url("busy"),
        url("queues"),
        url("scheduled"),
        url("retries"),
        url("dead"),
        url("dead") + "?order=oldest",
        url("metrics"),
    ):
        ok(client, path)
    strict_json(client.get(url("stats")).content)
    for kind, found in (entry_keys or {}).items():
        for key in found:
            ok(client, url("entry", kind=kind, key=key))


def entry_keys(client: Client) -> dict[str, list[str]]:
    """The entry addresses the set pages link to."""
    out = {}
    for kind in ("scheduled", "retries", "dead"):
        page = ok(client, url(kind) + "?count=100")
        prefix = url(kind)
        links = re.findall(rf'href="{re.escape(prefix)}([^"]+)/"', page)
        out[kind] = sorted({unquote(html.unescape(link)) for link in links if not link.startswith("?")})
    return out


# Queue names ---------------------------------------------------------------------------


def test_queue_names_are_validated_whole() -> None:
    from django_wurk import ConfigError, job
    from django_wurk.core.config import QUEUE_NAME

    for bad in ("mail\n", "mail\r\n", "\nmail", "mail\x00", "ma il", "a\nb", ""):
        assert not QUEUE_NAME.match(bad), bad
        with pytest.raises(ValueError, match="queue"):
            job(queue=bad)(lambda: None)
        with pytest.raises(ValueError, match="queue"):
            job(retry_queue=bad)(lambda: None)
    for bad in ("a\nb", "mail\x00x", "ma il"):
        with pytest.raises(ConfigError):
            Config.from_mapping({"QUEUES": [bad]})
    # Settings are stripped ("mail\n" is the queue "mail"), as before.
    assert Config.from_mapping({"QUEUES": ["mail\n"]}).queues[0].name == "mail"
    assert QUEUE_NAME.match("mail:high.v2-x_y")


def test_queue_names_no_client_would_write_do_not_break_pages(manager: Client, r: Any) -> None:
    names = ["mail\n", "", " ", "a/b", "50%", "?x=1#y", "é ✓", "\x00nul", "tab\there", XSS, "q" * 2000]
    for name in names:
        push(r, payload(queue=name), queue=name)
    add_process(r, "web1:1:abcdefabcdef", busy_jobs=0, queues=names)
    for i, name in enumerate(names):
        r.hset(
            keys.work("web1:1:abcdefabcdef"),
            f"t{i}",
            json.dumps({"queue": name, "payload": wire.dumps(payload(queue=name)), "run_at": 1}),
        )
    listing = ok(manager, url("queues"))
    busy = ok(manager, url("busy"))
    assert "&lt;script&gt;" in listing and "&lt;script&gt;" in busy
    for name in names:
        if not name:
            continue  # no page of its own (no URL names it), but it is listed
        page = ok(manager, url("queue", name=name))
        assert "1 job" in page, repr(name)
        response = manager.post(url("queue_pause"), {"name": name, "next": url("queue", name=name)})
        assert response.status_code == 302 and r.sismember(keys.PAUSED, name)
        response = manager.post(url("queue_clear"), {"name": name, "confirm": "yes"})
        assert response.status_code == 302 and not r.exists(keys.queue(name))


# Timestamps ----------------------------------------------------------------------------


@pytest.mark.parametrize("stamp", BAD_STAMPS, ids=lambda s: s.decode()[:12])
def test_timestamps_that_are_not_times(manager: Client, r: Any, stamp: bytes) -> None:
    r.sadd(keys.QUEUES, "default")
    r.lpush(keys.queue("default"), raw_job(stamp, 1))
    r.zadd(keys.SCHEDULE, {raw_job(stamp, 2): time.time() + 60})
    r.zadd(keys.RETRY, {raw_job(stamp, 3): time.time() + 60})
    r.zadd(keys.DEAD, {raw_job(stamp, 4): time.time() - 60})
    found = entry_keys(manager)
    assert all(len(v) == 1 for v in found.values()), found
    all_pages(manager, found)
    stats = strict_json(manager.get(url("stats")).content)
    assert stats["sidekiq"]["enqueued"] == 1 and stats["sidekiq"]["default_latency"] >= 0


def test_stats_is_strict_json_with_a_minus_infinity_enqueued_at(viewer: Client, r: Any) -> None:
    r.sadd(keys.QUEUES, "default")
    r.lpush(keys.queue("default"), raw_job(b"-Infinity"))
    response = viewer.get(url("stats"))
    assert response.status_code == 200
    data = strict_json(response.content)
    assert data["sidekiq"]["default_latency"] == 0


def test_counters_that_are_not_numbers(viewer: Client, r: Any) -> None:
    r.set(keys.STAT_PROCESSED, "abc")
    r.set(keys.STAT_FAILED, "1e400")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    r.set(keys.daily_stat("processed", today), "-Infinity")
    r.set(keys.daily_stat("failed", today), "9" * 4000)
    data = strict_json(viewer.get(url("stats")).content)
    assert data["sidekiq"]["processed"] == 0 and data["sidekiq"]["failed"] == 0
    ok(viewer, url("changelist"))


# Heartbeats ----------------------------------------------------------------------------

HEARTBEAT_FIELDS = {
    "busy": ["abc", "-1e400", "NaN", "1" + "0" * 400, ""],
    "beat": ["abc", "inf", "-inf", "nan", "1e400", ""],
    "rss": ["abc", "1e400", "-5"],
    "rtt_us": ["abc", "nan"],
    "concurrency": ["many", "1e400", "-Infinity"],
    "quiet": ["maybe", ""],
}
INFO_FIELDS = {
    "pid": ["abc", 1e300, [1], None, 10**400],
    "started_at": ["abc", "-Infinity", 10**400, [1], {"a": 1}],
    "hostname": [{"a": 1}, [1, 2], None, XSS],
    "tag": [[1], {"x": XSS}],
    "queues": ["default", 5, [{"a": 1}, None, XSS], {"q": 1}, None],
    "labels": ["x", 5, {"a": 1}, [[1]], None],
    "concurrency": ["many", 1e300, [1], None],
    "version": [[1], None],
    "embedded": ["yes", [1]],
}


def heartbeats(r: Any) -> Iterator[str]:
    n = 0
    for field, values in HEARTBEAT_FIELDS.items():
        for value in values:
            n += 1
            identity = add_process(r, f"h{n}:{n}:abcdef", busy_jobs=1)
            r.hset(identity, field, value)
            yield identity
    for field, values in INFO_FIELDS.items():
        for value in values:
            n += 1
            identity = add_process(r, f"h{n}:{n}:abcdef", busy_jobs=1)
            info = json.loads(r.hget(identity, "info"))
            info[field] = value
            r.hset(identity, "info", json.dumps(info))
            yield identity
    for info in (b"[1,2]", b'"text"', b"-Infinity", b"\xff\xfe", DEEP, b'{"pid":' + b"9" * 5000 + b"}"):
        n += 1
        identity = add_process(r, f"h{n}:{n}:abcdef", busy_jobs=0)
        r.hset(identity, "info", info)
        yield identity


WORK_ENTRIES = [
    b"not json",
    DEEP,
    b"[1]",
    json.dumps({"queue": [1], "payload": {"class": "X", "args": []}, "run_at": "abc"}).encode(),
    json.dumps({"queue": "q", "payload": "\ud800", "run_at": 10**400}).encode(),
    b'{"queue":"q","payload":{"class":"X","args":[NaN]},"run_at":-Infinity}',
    json.dumps({"queue": "mail\n", "payload": [1, 2], "run_at": [1]}).encode(),
    json.dumps({"queue": None, "payload": None, "run_at": None}).encode(),
    b'{"queue":"q","payload":' + json.dumps(DEEP.decode()).encode() + b',"run_at":1}',
]


def test_heartbeats_with_wrong_types_in_every_field(manager: Client, r: Any) -> None:
    identities = list(heartbeats(r))
    for i, value in enumerate(WORK_ENTRIES):
        r.hset(keys.work(identities[0]), f"bad{i}", value)
    busy = ok(manager, url("busy"))
    for identity in identities:
        assert identity in busy, identity
    all_pages(manager)
    strict_json(manager.get(url("stats")).content)
    for identity in (identities[0], "*"):
        response = manager.post(url("busy_signal"), {"signal": "quiet", "identity": identity})
        assert response.status_code == 302


# Entry addresses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "score", [-5.5, -1e-05, -1e20, -0.0, 0.0, 1e-07, 1e20, float("inf"), float("-inf"), -1795966991.5853264]
)
def test_entries_with_any_score_can_be_opened_and_acted_on(
    manager: Client, r: Any, wurk: Wurk, score: float
) -> None:
    key = zadd(r, keys.RETRY, failed(jid="a-b-c"), score)
    assert parse_entry_key(key) == (score, "a-b-c")
    [listed] = entry_keys(manager)["retries"]
    assert listed == key
    page = ok(manager, url("entry", kind="retries", key=key))
    assert "a-b-c" in page and "no longer" not in page
    response = manager.post(url("bulk", kind="retries"), {"action": "retry", "key": [key]})
    assert said(response) == ["1 job retried."]
    assert r.zcard(keys.RETRY) == 0 and r.llen(keys.queue("default")) == 1


@pytest.mark.parametrize(
    "key",
    ["nan-abc", "NaN-x", "-nan-x", "nan", "abc", "-", "--", "1.5", "inf", "1e999999-x", "+-1-x", "0x10-x",
     "1_000-x", "\u0661-x", " 1-x", "1 -x", "%00", "\x00-\x00", "1.0-" + "x" * 5000, f"1.0-{XSS}", "1.0-a\nb"],
)  # fmt: skip
def test_garbage_entry_addresses_say_the_job_is_not_there(manager: Client, r: Any, key: str) -> None:
    zadd(r, keys.DEAD, failed(), 1.0)
    response = manager.get(url("entry", kind="dead", key=key))
    assert response.status_code == 302
    assert said(response) == ["That job is no longer in the dead set."]
    for action in ("retry", "delete"):
        response = manager.post(url("bulk", kind="dead"), {"action": action, "key": [key]})
        assert response.status_code == 302 and "no longer in the dead set" in said(response)[0]
    assert r.zcard(keys.DEAD) == 1


def test_parse_entry_key_round_trips_every_score() -> None:
    for score in (1795966991.5853264, -1.5, -1e-05, 1e-07, -0.0, 1e300, float("inf"), float("-inf")):
        for jid in ("300194a3c6ab2a0c4e8ce1d7", "a-b", "-", "1e-05", "inf-inf", "x\ny"):
            assert parse_entry_key(f"{score!r}-{jid}") == (score, jid)
    # Any double at all (random bit patterns, so subnormals and huge exponents too).
    rng = random.Random(10)
    for _ in range(20_000):
        score = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if score == score:  # NaN is never a score
            assert parse_entry_key(f"{score!r}-e-1-{score!r}") == (score, f"e-1-{score!r}")
    # Ruby's way of printing a float (Sidekiq's Web UI links) reads the same.
    assert parse_entry_key("1.0e+20-abc") == (1e20, "abc")
    assert parse_entry_key("-Infinity-abc") == (float("-inf"), "abc")
    for bad in ("nan-abc", "abc", "1.5", "1.5-", "-jid", "1e999-x"):
        with pytest.raises(ValueError):
            parse_entry_key(bad)


def test_jids_that_are_not_strings_or_have_odd_characters(manager: Client, r: Any) -> None:
    for i, jid in enumerate(["a\nb", "a/b", "?#%", "", " ", XSS, "x" * 3000]):
        zadd(r, keys.DEAD, failed(jid=jid), 10.0 + i)
    for i, jid_bytes in enumerate([b"5", b"[1,2]", b"{}", b"null", b"1e400", b"-Infinity"]):
        raw = wire.dumps(failed()).encode().replace(b'"jid":"', b'"jid":' + jid_bytes + b',"x":"')
        r.zadd(keys.DEAD, {raw: 20.0 + i})
    found = entry_keys(manager)["dead"]
    assert len(found) == 13
    all_pages(manager, {"dead": found})
    for key in found:
        response = manager.post(url("bulk", kind="dead"), {"action": "delete", "key": [key]})
        assert said(response) == ["1 job deleted."], key
    assert r.zcard(keys.DEAD) == 0


# Members nobody can read ---------------------------------------------------------------


#: Members that cannot be run or written back as they are: never decoded, or not re-encodable.
POISON = [
    DEEP,
    b'{"class":"X","args":["\\ud800"],"jid":"surrogate"}',
    b'{"class":"X","args":[NaN,Infinity,-Infinity],"jid":"nan"}',
    b"",
    b"\xff",
    b"null",
    b"[1,2]",
]
#: Members with odd shapes: some decode, some do not; every page must show them all.
UNREADABLE = [
    *POISON,
    b'{"class":"X","args":' + b"[" * 900 + b"]" * 900 + b"}",
    b'{"class":"X","args":[],"retry_count":' + b"9" * 4000 + b"}",
    b'{"class":"X","args":[],"retry_count":' + b"9" * 5000 + b"}",
    b'{"class":"X","args":["\\ud800"],"error_backtrace":"abc"}',
    b'{"class":"X","args":[],"error_backtrace":[1,{"a":2}],"tags":"abc"}',
    b'{"class":"X","args":[NaN,Infinity,-Infinity]}',
    b'{"class":"X","args":[],"wrapped":{"a":1},"display_class":[1]}',
    b'{"class":"Sidekiq::ActiveJob::Wrapper","args":[{"arguments":5}]}',
    b'{"class":"Sidekiq::ActiveJob::Wrapper","args":[{"job_class":"X","arguments":[{"_aj_symbol_keys":5}]}]}',
    b'{"class":"X","args":[],"encrypt":true}',
    b'{"class":"X","args":[1],"encrypt":[1]}',
    b'{"class":"X","args":[],"error_backtrace":"'
    + base64.b64encode(zlib.compress(b"[" * 100_000 + b"]" * 100_000))
    + b'"}',
]
assert len(set(UNREADABLE)) == len(UNREADABLE)


def test_unreadable_members_in_every_key_kind(manager: Client, r: Any) -> None:
    r.sadd(keys.QUEUES, "default")
    for i, raw in enumerate(UNREADABLE):
        r.lpush(keys.queue("default"), raw)
        for key in (keys.SCHEDULE, keys.RETRY, keys.DEAD):
            r.zadd(key, {raw: 100.0 + i})
    found = entry_keys(manager)
    all_pages(manager, found)
    ok(manager, url("queue", name="default") + "?order=oldest&count=100")
    ok(manager, url("dead") + "?q=X")


@pytest.mark.parametrize("action", ["retry_all", "delete_all"])
def test_dead_retry_all_and_delete_all_with_poison_entries(
    manager: Client, r: Any, wurk: Wurk, action: str
) -> None:
    for i, raw in enumerate(POISON):
        r.zadd(keys.DEAD, {raw: 100.0 + i})
    zadd(r, keys.DEAD, failed(args=[1]), float("inf"))
    zadd(r, keys.DEAD, failed(args=[2]), float("-inf"))
    zadd(r, keys.DEAD, failed(args=[3]), 5.0)
    response = manager.post(url("all", kind="dead"), {"action": action, "confirm": "yes"})
    assert response.status_code == 302
    if action == "retry_all":
        assert said(response)[0] == "3 jobs retried."
        assert r.llen(keys.queue("default")) == 3
        assert r.zcard(keys.DEAD) == len(POISON)
        assert (
            said(response)[1]
            == f"{len(POISON)} left in the dead set (unreadable payloads, or added meanwhile)."
        )
    else:
        assert said(response) == [f"{len(POISON) + 3} jobs deleted."]
    ok(manager, url("dead"))


def test_retry_now_of_an_entry_that_cannot_be_written_back_says_so(manager: Client, r: Any) -> None:
    r.zadd(keys.DEAD, {b'{"class":"X","args":[NaN],"jid":"nan0"}': 10.0})
    key = entry_keys(manager)["dead"][0]
    response = manager.post(url("bulk", kind="dead"), {"action": "retry", "key": [key]})
    assert response.status_code == 302
    assert "could not be retried" in said(response)[0]
    assert r.zcard(keys.DEAD) == 1 and r.llen(keys.queue("default")) == 0


# Metrics -------------------------------------------------------------------------------


def test_metrics_with_odd_class_names_and_values(viewer: Client, r: Any) -> None:
    write_metrics(r, "app.jobs.Fine")
    [minute_key] = [k for k in r.keys("j|*") if k.count(b":") == 1 and len(k.split(b":")[1]) == 2]
    for name in ("", "a\nb", "a/b", XSS, "x" * 3000, "%"):
        r.hset(minute_key, mapping={f"{name}|p": "abc", f"{name}|f": "1e400", f"{name}|ms": "-Infinity"})
    for i, value in enumerate(["9" * 4000, "-" + "9" * 4000, "9" * 300, "-5", "1.5"]):
        r.hset(minute_key, mapping={f"Big{i}|p": value, f"Big{i}|f": value, f"Big{i}|ms": value})
    page = ok(viewer, url("metrics"))
    assert "&lt;script&gt;" in page
    for name in ("a\nb", "a/b", XSS, "%", "Big0", "Big1", "Big2"):
        ok(viewer, url("metrics_class", name=name))
        ok(viewer, url("metrics_class", name=name) + "?period=24h")


# Made-up queues ------------------------------------------------------------------------


def test_a_made_up_queue_is_not_found(viewer: Client, r: Any) -> None:
    response = viewer.get(url("queue", name="made-up"))
    assert response.status_code == 404
    body = response.content.decode()
    assert "No queue named “made-up”." in body and "Pause" not in body
    evil = viewer.get(url("queue", name=XSS))
    assert evil.status_code == 404 and "<script>window" not in evil.content.decode()


def test_known_queues_have_a_page_even_when_empty(viewer: Client, r: Any) -> None:
    r.sadd(keys.QUEUES, "listed")
    r.sadd(keys.PAUSED, "paused-only")
    r.lpush(keys.queue("unlisted"), wire.dumps(payload()))
    assert "This queue is empty." in ok(viewer, url("queue", name="listed"))
    assert "paused" in ok(viewer, url("queue", name="paused-only"))
    assert "1 job" in ok(viewer, url("queue", name="unlisted"))


# For real: "Retry all" from the dashboard while workers fail the jobs again -------------


def test_dashboard_retry_all_runs_each_dead_job_once(manager: Client, r: Any, workers: Launcher) -> None:
    from tests.test_api_bulk_actions import RUNS, fails_into_the_dead_set, settled

    count = 300
    now = time.time()
    pipe = r.pipeline(transaction=False)
    for n in range(count):
        body = payload(fails_into_the_dead_set.wire_name, [n], retry=0)
        pipe.zadd(keys.DEAD, {wire.dumps(body): now - 1000 + n})
    pipe.execute()
    for round_ in (1, 2):
        response = manager.post(url("all", kind="dead"), {"action": "retry_all", "confirm": "yes"})
        assert said(response)[0] == f"{count} jobs retried."
        wait_for(lambda: settled(r, count, keys.DEAD), timeout=60)
        assert {int(v) for v in r.hvals(RUNS)} == {round_}


def test_api_sets_survive_the_same_data(wurk: Wurk, r: Any) -> None:
    """The data API behind the pages: iterating and finding never raise on these members."""
    for i, raw in enumerate(UNREADABLE):
        r.zadd(keys.DEAD, {raw: -100.0 - i})
        r.zadd(keys.RETRY, {raw: float(i)})
    for entry in DeadSet(wurk):
        if entry.jid:
            assert DeadSet(wurk).find(entry.key) is not None
        assert entry.latency >= 0 and isinstance(entry.job_class, str)
        entry.display_args, entry.backtrace, entry.tags, entry.enqueued_at  # noqa: B018
    assert RetrySet(wurk).size() == len(UNREADABLE)


# Keys of the wrong type ----------------------------------------------------------------


def test_a_key_of_the_wrong_type_gives_a_page_that_says_so(manager: Client, r: Any) -> None:
    r.set(keys.RETRY, "not a sorted set")
    response = manager.get(url("retries"))
    assert response.status_code == 503
    body = response.content.decode()
    assert "Redis refused a command." in body and "WRONGTYPE" in body
    assert manager.get(url("stats")).json()["error"] == "redis_unavailable"
    response = manager.post(url("all", kind="retries"), {"action": "retry_all", "confirm": "yes"})
    assert response.status_code == 503
    assert ok(manager, url("busy"))  # a page that does not read it still works (the tab count is left out)


def test_deleting_a_job_whose_jid_no_encoding_can_write(manager: Client, r: Any) -> None:
    """A job no encoding can write can still be deleted, and the audit record is written."""
    from django.contrib.admin.models import LogEntry

    raw = b'{"class":"X","args":[],"jid":"\\ud800\\udfff-\\ud800","queue":"default"}'
    r.sadd(keys.QUEUES, "default")
    r.lpush(keys.queue("default"), raw)
    page = ok(manager, url("queue", name="default"))
    [digest] = re.findall(r'name="digest" value="([0-9a-f]+)"', page)
    response = manager.post(url("queue_delete"), {"name": "default", "digest": digest, "position": "0"})
    assert response.status_code == 302 and r.llen(keys.queue("default")) == 0
    # Lone surrogates are refused by the decoding policy (wire.decode_json), so the entry is
    # shown and deleted as unreadable; the audit record and the message still get written.
    assert said(response)[0].startswith("Deleted (unreadable payload) job")
    ok(manager, url("queue", name="default"))  # the message is shown on the next page
    assert "unreadable" in LogEntry.objects.get().change_message


def test_a_process_whose_key_is_not_a_hash_does_not_break_the_pages_or_the_signals(
    manager: Client, r: Any
) -> None:
    """A name in ``processes`` whose key holds a list (or a string) is no live worker: every page
    that lists processes skips it, and "Quiet all" still reaches the live ones."""
    live = add_process(r, "web1:123:abcdef012345", busy_jobs=2)
    r.sadd(keys.PROCESSES, "odd:7:key-holds-a-list", "odd:8:key-holds-a-string")
    r.rpush("odd:7:key-holds-a-list", "x")
    r.set("odd:8:key-holds-a-string", "x")
    all_pages(manager)
    busy = ok(manager, url("busy"))
    assert live in busy and "odd:7" not in busy
    assert strict_json(manager.get(url("stats")).content)["sidekiq"]["busy"] == 2
    response = manager.post(url("busy_signal"), {"signal": "quiet", "identity": "*"})
    assert response.status_code == 302 and said(response)[0].startswith("1 process quieted.")
    assert r.lrange(keys.signals(live), 0, -1) == [b"TSTP"]
    response = manager.post(url("busy_signal"), {"signal": "stop", "identity": "odd:7:key-holds-a-list"})
    assert response.status_code == 302 and "is no longer running" in said(response)[0]
    assert r.lrange("odd:7:key-holds-a-list", 0, -1) == [b"x"]


def test_two_unreadable_entries_at_one_score_each_open_and_go_by_their_own_key(
    manager: Client, r: Any
) -> None:
    """``<score>-`` named only the first unreadable entry at a score; the others could not be
    opened, and deleting "the one shown" could delete another."""
    members = [b"\xff first", b"not json: second", b'{"class":"X","args":[],"note":"no jid"}']
    for raw in members:
        r.zadd(keys.DEAD, {raw: 5.0})
    found = entry_keys(manager)["dead"]
    assert len(found) == len(members)
    shown = {key: ok(manager, url("entry", kind="dead", key=key)) for key in found}
    # Each key opens its own entry.
    words = ("first", "second", "no jid")
    assert {next((w for w in words if w in page), None) for page in shown.values()} == set(words)
    second = next(k for k, page in shown.items() if "second" in page)
    response = manager.post(url("bulk", kind="dead"), {"action": "delete", "key": [second]})
    assert response.status_code == 302
    assert sorted(r.zrange(keys.DEAD, 0, -1)) == sorted([members[0], members[2]])
