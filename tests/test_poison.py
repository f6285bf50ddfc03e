"""Poison data in every loop that walks Redis: processor outcome, poller and reaper (issue 10, cases 1-3).

A poison entry is one the engine cannot run or cannot write back: NaN or Infinity in the
JSON, nesting deeper than Ruby's JSON accepts, lone surrogates, invalid JSON or UTF-8, odd
field values. Whatever it is, each test checks the same promise against a real worker:
the entry ends in the dead set exactly once with its original bytes and a reason (or, for
an odd field Sidekiq would tolerate, in its normal place), it is left in no private list,
no thread dies, and the good jobs beside it are processed.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Config, Job, Wurk
from django_wurk.core import wire
from django_wurk.core.config import QueueSpec
from django_wurk.core.worker import Launcher
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.reaper import Reaper
from django_wurk.core.worker.retry import RetryHandler
from django_wurk.core.worker.scheduler import Poller
from tests.conftest import wait_for
from tests.jobsapp import jobs

FAILS = "tests.jobsapp.jobs.always_fails"  # retry=2, backtrace=True
ECHO = "tests.jobsapp.jobs.echo"
DEEP = b"[" * 100_000 + b"]" * 100_000


def stored(fields: bytes, job_class: str = FAILS, args: bytes = b"[1]") -> bytes:
    """A payload written by hand, as another producer (or an attacker) could write it."""
    head = b'{"class":"' + job_class.encode() + b'","args":' + args + b',"queue":"default","jid":"'
    return head + wire.new_jid().encode() + b'"' + fields + b"}"


#: Payloads a worker cannot run or cannot write back, with a word of the reason expected.
UNRUNNABLE = [
    pytest.param(stored(b"", args=b"[NaN]"), "NaN", id="nan"),
    pytest.param(stored(b"", args=b"[Infinity]"), "Infinity", id="infinity"),
    pytest.param(stored(b"", args=b"[-Infinity]"), "-Infinity", id="minus-infinity"),
    pytest.param(stored(b"", args=b"[1e400]"), "out of range", id="float-overflow"),
    pytest.param(stored(b"", args=b'["\\ud800"]'), "surrogate", id="lone-surrogate"),
    pytest.param(stored(b"", args=DEEP), "nesting", id="deep-100000"),
    pytest.param(stored(b"", args=b"[" * 101 + b"]" * 101), "nesting", id="deep-101"),
    pytest.param(stored(b',"retry_count":NaN'), "NaN", id="nan-retry-count"),
]


@pytest.fixture
def launcher(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def private_lists(r: Any) -> list[bytes]:
    return list(r.scan_iter(match="queue:sq|*"))


def dead(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange("dead", 0, -1)]


def original_bytes(envelope: dict[str, Any]) -> bytes:
    if "payload_base64" in envelope:
        return base64.b64decode(envelope["payload_base64"])
    [text] = envelope["args"]
    return str(text).encode("utf-8")


def assert_buried_once(r: Any, raw: bytes, reason: str, source: str = "") -> dict[str, Any]:
    matches = [
        e
        for e in dead(r)
        if e.get("class") == "django_wurk.InvalidPayload"
        and original_bytes(e) == raw
        and source in e["error_message"]
    ]
    assert len(matches) == 1, f"{len(matches)} dead entries hold {raw[:80]!r}"
    [envelope] = matches
    assert envelope["error_class"] == "InvalidPayload" and reason in envelope["error_message"]
    assert envelope["retry"] == 0
    return envelope


def processors_alive(worker: Launcher, threads: list[threading.Thread]) -> bool:
    """True when the processor threads are the very ones started (none crashed and was replaced)."""
    current = [p.thread for p in worker.manager.processors]
    return current == threads and all(t.is_alive() for t in current)


def settle(r: Any, worker: Launcher, threads: list[threading.Thread]) -> None:
    """A good job behind the poison runs, nothing stays in a private list, no thread died."""
    jobs.echo.perform_async("after")
    wait_for(lambda: b'["after"]' in r.lrange("seen:echo", 0, -1))
    wait_for(lambda: private_lists(r) == [])
    assert processors_alive(worker, threads)


# Case 1: the processor -----------------------------------------------------------------


@pytest.mark.parametrize(("raw", "reason"), UNRUNNABLE)
def test_a_payload_that_cannot_be_written_back_is_buried_once_and_the_worker_goes_on(
    wurk: Wurk, r: Any, launcher: Launcher, raw: bytes, reason: str
) -> None:
    threads = [p.thread for p in launcher.manager.processors]
    r.lpush("queue:default", raw)
    wait_for(lambda: r.zcard("dead") == 1)
    assert_buried_once(r, raw, reason)
    settle(r, launcher, threads)
    assert r.zcard("retry") == 0 and r.zcard("dead") == 1


#: Odd values in the fields the retry handler reads. Sidekiq would record these (or treat
#: the field as absent), so the job is retried or buried as usual, never lost or stuck.
ODD_FIELDS = [
    pytest.param(b',"retry":true,"retry_count":' + b"9" * 400, "dead", id="retry-count-400-digits"),
    pytest.param(
        b',"retry":' + b"9" * 401 + b',"retry_count":' + b"9" * 400, "retry", id="huge-retry-and-count"
    ),
    pytest.param(b',"retry_count":-3', "retry", id="negative-retry-count"),
    pytest.param(b',"retry_count":"abc"', "retry", id="string-retry-count"),
    pytest.param(b',"retry_count":true', "retry", id="bool-retry-count"),
    pytest.param(b',"retry_count":1.5', "retry", id="float-retry-count"),
    pytest.param(b',"backtrace":"abc"', "retry", id="string-backtrace"),
    pytest.param(b',"backtrace":[1]', "retry", id="list-backtrace"),
    pytest.param(b',"backtrace":-1', "retry", id="negative-backtrace"),
    pytest.param(b',"backtrace":' + b"9" * 400, "retry", id="huge-backtrace"),
    pytest.param(b',"retry_for":' + b"9" * 400, "retry", id="huge-retry-for"),
    pytest.param(b',"retry_for":60,"retry_count":0,"failed_at":' + b"9" * 400, "retry", id="huge-failed-at"),
    pytest.param(b',"retry_for":60,"retry_count":0,"failed_at":{"a":1}', "retry", id="object-failed-at"),
    pytest.param(b',"retry_for":"soon"', "retry", id="string-retry-for"),
    pytest.param(b',"retry":"yes"', "retry", id="string-retry"),
    pytest.param(b',"retry":[1]', "retry", id="list-retry"),
    pytest.param(b',"retry":-5', "dead", id="negative-retry"),
    pytest.param(b',"retry_queue":{"a":1}', "retry", id="object-retry-queue"),
    pytest.param(
        b',"error_message":{"a":[1]},"error_class":[],"error_backtrace":7', "retry", id="odd-error-fields"
    ),
    pytest.param(b',"dead":"no","retry":0', "dead", id="string-dead"),
]


@pytest.mark.parametrize(("fields", "where"), ODD_FIELDS)
def test_a_failing_job_with_odd_field_values_is_recorded_once(
    wurk: Wurk, r: Any, launcher: Launcher, fields: bytes, where: str
) -> None:
    threads = [p.thread for p in launcher.manager.processors]
    raw = stored(fields)
    jid = json.loads(raw)["jid"]
    r.lpush("queue:default", raw)
    wait_for(lambda: r.zcard("retry") + r.zcard("dead") == 1)
    [member] = r.zrange(where, 0, -1)
    entry = json.loads(member)
    assert entry["jid"] == jid and entry["class"] == FAILS
    assert entry["error_class"] == "ValueError" and entry["error_message"] == "boom 1"
    assert isinstance(entry["retry_count"], int)
    if where == "retry":
        assert entry["queue"] == "default"  # an unusable retry_queue is ignored
        [(_, score)] = r.zrange("retry", 0, -1, withscores=True)
        assert time.time() < score < time.time() + 200 * 365 * 86400
    settle(r, launcher, threads)
    assert r.zcard("retry") + r.zcard("dead") == 1


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


class RaisesUnprintable(Job):
    wire_name = "tests.test_poison.RaisesUnprintable"
    retry = 3

    def perform(self) -> None:
        raise Unprintable()


def test_an_exception_that_cannot_be_printed_is_still_recorded(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    threads = [p.thread for p in launcher.manager.processors]
    jid = RaisesUnprintable.perform_async()
    wait_for(lambda: r.zcard("retry") == 1)
    [entry] = [json.loads(m) for m in r.zrange("retry", 0, -1)]
    assert entry["jid"] == jid and entry["error_class"] == "Unprintable"
    assert "Unprintable" in entry["error_message"]
    settle(r, launcher, threads)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("Out of range float values are not JSON compliant"),
        RecursionError("maximum recursion depth exceeded"),
        TypeError("Object of type set is not JSON serializable"),
        OverflowError("int too large to convert to float"),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_when_the_retry_cannot_be_written_the_job_goes_to_the_dead_set_once(
    wurk: Wurk, r: Any, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """The catch-all: whatever stops the retry handler (short of Redis being down) buries the job."""
    calls: list[bytes] = []

    def cannot_record(self: RetryHandler, raw: bytes, queue: str, job: Any, exc: BaseException) -> str:
        calls.append(raw)
        raise error

    monkeypatch.setattr(RetryHandler, "handle", cannot_record)
    worker = Launcher(wurk)
    worker.start()
    try:
        threads = [p.thread for p in worker.manager.processors]
        raw = stored(b',"retry":true')
        r.lpush("queue:default", raw)
        wait_for(lambda: r.zcard("dead") == 1)
        envelope = assert_buried_once(r, raw, "boom 1")
        assert type(error).__name__ in envelope["error_message"]
        settle(r, worker, threads)
        assert calls == [raw]  # run once, not again at every restart
        assert r.zcard("retry") == 0 and r.zcard("dead") == 1
    finally:
        worker.stop()
    assert private_lists(r) == [] and r.llen("queue:default") == 0


# Case 2: the poller --------------------------------------------------------------------

#: Sorted-set members the poller cannot promote, each with a word of the reason.
POISON_MEMBERS = [
    (stored(b"", ECHO, b"[NaN]"), "NaN"),
    (stored(b"", ECHO, b"[Infinity]"), "Infinity"),
    (stored(b"", ECHO, DEEP), "nesting"),
    (stored(b"", ECHO, b'["\\udfff"]'), "surrogate"),
    (b"{broken", "not valid JSON"),
    (b"[1,2]", "not an object"),
    (b'"just a string"', "not an object"),
    (b"\xff\xfe\x00binary", "UTF-8"),
    (b"", "not valid JSON"),
]


def good_member(tag: str) -> bytes:
    return wire.dumps({"class": ECHO, "args": [tag], "queue": "default", "jid": wire.new_jid()}).encode()


def test_poison_in_retry_and_schedule_is_buried_and_the_entries_behind_it_are_promoted(
    wurk: Wurk, r: Any
) -> None:
    now = time.time()
    expected: set[str] = set()
    for key in ("retry", "schedule"):
        # The poison sorts first (an odd negative score too), the good entries behind it.
        for i, (member, _) in enumerate(POISON_MEMBERS):
            r.zadd(key, {member: -1e18 if i == 0 else now - 100 + i})
        for i in range(5):
            expected.add(f"{key}-{i}")
            r.zadd(key, {good_member(f"{key}-{i}"): now - 50 + i})
        r.zadd(key, {good_member(f"{key}-negative"): -5.0})
        expected.add(f"{key}-negative")
        r.zadd(key, {good_member(f"{key}-far-future"): 1e300})  # a huge score: not due, stays
    worker = Launcher(wurk)
    worker.start()
    try:
        threads = [p.thread for p in worker.manager.processors]
        wait_for(lambda: {json.loads(x)[0] for x in r.lrange("seen:echo", 0, -1)} == expected)
        wait_for(lambda: r.zcard("dead") == 2 * len(POISON_MEMBERS))  # each member, from each set
        assert processors_alive(worker, threads) and worker.poller.thread.is_alive()
    finally:
        worker.stop()
    for member, reason in POISON_MEMBERS:
        for key in ("retry", "schedule"):
            assert_buried_once(r, member, reason, source=f"the {key} set")
    assert r.llen("seen:echo") == len(expected)  # each good entry ran once
    for key in ("retry", "schedule"):
        [left] = r.zrange(key, 0, -1)
        assert json.loads(left)["args"] == [f"{key}-far-future"]
    assert private_lists(r) == []


def test_the_dead_set_holds_one_envelope_per_poison_member_and_set(wurk: Wurk, r: Any) -> None:
    """The same bytes in ``retry`` and ``schedule`` are two entries; each is buried once."""
    member, _ = POISON_MEMBERS[0]
    r.zadd("retry", {member: time.time() - 1})
    r.zadd("schedule", {member: time.time() - 1})
    poller = Poller(wurk, Outage(wurk.config.redis_url))
    assert poller.enqueue_due() == 0
    assert poller.enqueue_due() == 0
    assert r.zcard("dead") == 2
    assert_buried_once(r, member, "NaN", source="the retry set")
    assert_buried_once(r, member, "NaN", source="the schedule set")
    assert r.zcard("retry") == 0 and r.zcard("schedule") == 0


def test_racing_pollers_bury_each_poison_entry_once_and_push_each_good_one_once(wurk: Wurk, r: Any) -> None:
    due = time.time() - 10
    poison: set[bytes] = set()
    for i in range(60):
        member = stored(
            b',"n":' + str(i).encode(), "X", [b"[NaN]", b"[Infinity]", b"[" * 150 + b"]" * 150][i % 3]
        )
        poison.add(member)
        r.zadd("schedule", {member: due + i * 0.01})
    for i in range(240):
        payload = {"retry": True, "queue": "race", "args": [i], "class": "X", "jid": f"{i:024x}"}
        r.zadd("schedule", {wire.dumps(payload): due + i * 0.001})
    pollers = [Poller(wurk, Outage(wurk.config.redis_url)) for _ in range(4)]
    errors: list[BaseException] = []

    def drain(poller: Poller) -> None:
        try:
            poller.enqueue_due()
        except BaseException as exc:  # a pass that stops is the bug; report it, do not hang
            errors.append(exc)

    threads = [threading.Thread(target=drain, args=(p,)) for p in pollers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    jids = [json.loads(x)["jid"] for x in r.lrange("queue:race", 0, -1)]
    assert len(jids) == 240 and len(set(jids)) == 240
    buried = [original_bytes(e) for e in dead(r)]
    assert len(buried) == 60 and set(buried) == poison
    assert r.zcard("schedule") == 0


def test_an_entry_whose_queue_key_is_not_a_list_is_buried_not_lost(wurk: Wurk, r: Any) -> None:
    """A script is not rolled back when its LPUSH fails, so the type is checked before the ZREM."""
    r.set("queue:wrongtype", "someone else's string")
    member = wire.dumps({"class": ECHO, "args": ["x"], "queue": "wrongtype", "jid": wire.new_jid()}).encode()
    r.zadd("schedule", {member: time.time() - 10})
    good = good_member("behind")
    r.zadd("schedule", {good: time.time() - 5})
    poller = Poller(wurk, Outage(wurk.config.redis_url))
    assert poller.enqueue_due() == 1
    envelope = assert_buried_once(r, member, "holds a string, not a list", source="the schedule set")
    assert envelope["queue"] == "wrongtype"
    assert r.lrange("queue:default", 0, -1) != [] and r.zcard("schedule") == 0
    assert r.get("queue:wrongtype") == b"someone else's string"


class FailsWhileDown:
    """Client middleware that needs something else (a database) and fails while it is down."""

    down = threading.Event()

    def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
        if self.down.is_set() and str(payload["args"][0]).startswith("needs-db"):
            raise ConnectionRefusedError("the database is down")
        return call_next()


def test_a_client_middleware_failure_leaves_the_entry_for_the_next_pass_and_the_pass_goes_on(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A middleware failing for a while must not bury every due retry, nor stall the set.

    More failing entries than one read (100) sit in front, so a pass that re-read from the
    start would never reach the good entries behind them.
    """
    wurk.client_middleware.add(FailsWhileDown)
    FailsWhileDown.down.set()
    reported: list[dict[str, Any]] = []
    wurk.error_handlers.append(lambda exc, context: reported.append(context))
    due = time.time() - 100
    waiting = {good_member(f"needs-db-{i}"): due + i * 0.01 for i in range(130)}
    r.zadd("retry", waiting)
    r.zadd("retry", {good_member(f"behind-{i}"): due + 50 + i for i in range(5)})
    poller = Poller(wurk, Outage(wurk.config.redis_url))
    try:
        assert poller.enqueue_due() == 5
        assert poller.enqueue_due() == 0  # still down: left again, nothing buried
        queued = [json.loads(m)["args"][0] for m in r.lrange("queue:default", 0, -1)]
        assert sorted(queued) == [f"behind-{i}" for i in range(5)]
        assert r.zcard("dead") == 0
        # Each left as it was, score and all.
        assert dict(r.zrange("retry", 0, -1, withscores=True)) == waiting
        jid = json.loads(next(iter(waiting)))["jid"]
        assert any(jid in m and "the database is down" in m for m in caplog.messages)
        assert len(reported) == 2 * 130 and reported[0]["context"] == "poller: client middleware"
        FailsWhileDown.down.clear()  # the database is back: the next pass promotes them
        assert poller.enqueue_due() == 130
    finally:
        FailsWhileDown.down.clear()
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0 and r.llen("queue:default") == 135


class AddsNaN:
    def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
        if payload["args"] == ["unencodable"]:
            payload["measured"] = float("nan")
        return call_next()


def test_a_promotion_the_middleware_made_unencodable_is_buried_and_the_pass_goes_on(
    wurk: Wurk, r: Any
) -> None:
    """Not a passing failure: the same entry would fail the same way on every pass."""
    wurk.client_middleware.add(AddsNaN)
    member = good_member("unencodable")
    r.zadd("schedule", {member: time.time() - 10, good_member("behind"): time.time() - 5})
    poller = Poller(wurk, Outage(wurk.config.redis_url))
    assert poller.enqueue_due() == 1
    assert_buried_once(r, member, "cannot be encoded as JSON", source="the schedule set")
    assert [json.loads(m)["args"] for m in r.lrange("queue:default", 0, -1)] == [["behind"]]
    assert r.zcard("schedule") == 0


def test_an_entry_without_a_queue_passes_the_middleware_and_is_promoted_to_default(
    wurk: Wurk, r: Any
) -> None:
    """Another producer may leave ``queue`` out; Sidekiq promotes such an entry to ``default``."""
    seen_queues: list[str] = []

    class Records:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            seen_queues.append(queue)
            return call_next()

    wurk.client_middleware.add(Records)
    member = (
        b'{"class":"' + ECHO.encode() + b'","args":["no queue"],"jid":"' + wire.new_jid().encode() + b'"}'
    )
    r.zadd("schedule", {member: time.time() - 10})
    assert Poller(wurk, Outage(wurk.config.redis_url)).enqueue_due() == 1
    assert seen_queues == ["default"]
    [pushed] = r.lrange("queue:default", 0, -1)
    assert json.loads(pushed)["args"] == ["no queue"] and "queue" not in json.loads(pushed)
    assert r.zcard("schedule") == 0 and r.zcard("dead") == 0


def test_an_entry_whose_queue_is_not_a_name_is_buried_not_pushed_to_a_made_up_queue(
    wurk: Wurk, r: Any
) -> None:
    """``"queue": ["default"]`` was pushed to ``queue:['default']`` (Python's ``str()``), a list no
    worker reads and no payload names: the job was stranded without a word. Ruby's ``to_s``
    would make up another name; neither is a queue anyone asked for. A missing, null or empty
    queue still means ``default``, as for every push."""
    odd = {
        b'["default"]': "a list",
        b"5": "an int",
        b'{"x":1}': "a dict",
        b"true": "a bool",
        b"1.5": "a float",
    }
    due = time.time() - 10
    for key in ("retry", "schedule"):
        for value in odd:
            member = (
                b'{"class":"'
                + ECHO.encode()
                + b'","args":[1],"queue":'
                + value
                + b',"jid":"'
                + key.encode()
                + b'"}'
            )
            r.zadd(key, {member: due})
        for i, value in enumerate([b"null", b'""']):
            r.zadd(
                key,
                {
                    b'{"class":"'
                    + ECHO.encode()
                    + b'","args":["'
                    + key.encode()
                    + b'-default-%d"],"queue":' % i
                    + value
                    + b"}": due
                },
            )
        r.zadd(key, {good_member(f"{key}-behind"): due + 1})
    poller = Poller(wurk, Outage(wurk.config.redis_url))
    assert poller.enqueue_due() == 6
    queued = sorted(json.loads(x)["args"][0] for x in r.lrange("queue:default", 0, -1))
    assert queued == sorted(
        f"{k}-{n}" for k in ("retry", "schedule") for n in ("default-0", "default-1", "behind")
    )
    assert set(r.smembers("queues")) == {b"default"}
    assert not [k for k in r.scan_iter(match="queue:*") if k != b"queue:default"]
    for key in ("retry", "schedule"):
        for value, kind in odd.items():
            member = (
                b'{"class":"'
                + ECHO.encode()
                + b'","args":[1],"queue":'
                + value
                + b',"jid":"'
                + key.encode()
                + b'"}'
            )
            envelope = assert_buried_once(
                r, member, f"'queue' is {kind}, not a queue name", source=f"the {key} set"
            )
            assert envelope["queue"] == "default"
    assert r.zcard("retry") == 0 and r.zcard("schedule") == 0


def test_the_process_cleanup_drops_names_whose_key_is_not_a_process_hash(wurk: Wurk, r: Any) -> None:
    """No worker beats on a list or a string: such a name is a dead process, like an expired one."""
    r.sadd("processes", "live:1:1", "gone:2:2", "list:3:3", "string:4:4")
    r.hset("live:1:1", "beat", "1")
    r.rpush("list:3:3", "x")
    r.set("string:4:4", "x")
    Poller(wurk, Outage(wurk.config.redis_url)).cleanup_processes()
    assert r.smembers("processes") == {b"live:1:1"}
    assert r.lrange("list:3:3", 0, -1) == [b"x"] and r.get("string:4:4") == b"x"  # not ours to delete


# Case 3: the reaper --------------------------------------------------------------------


def fill_dead_worker(r: Any, identity: str, tag: str) -> tuple[list[str], list[bytes]]:
    """A dead process's private list: good jobs around poison, as a kill -9 would leave them."""
    poison = [stored(b',"n":"' + tag.encode() + b'"', ECHO, b"[NaN]"), stored(b"", ECHO, DEEP)]
    goods = [f"{tag}-{i}" for i in range(3)]
    members = [good_member(goods[0]), poison[0], good_member(goods[1]), poison[1], good_member(goods[2])]
    r.lpush(f"queue:sq|{identity}|default", *members)
    return goods, poison


def test_the_reaper_buries_poison_and_recovers_every_dead_workers_jobs(wurk: Wurk, r: Any) -> None:
    goods: list[str] = []
    poison: list[bytes] = []
    for n in range(3):
        g, p = fill_dead_worker(r, f"deadhost:{100 + n}:0123456789ab", f"w{n}")
        goods += g
        poison += p
    reaper = Reaper(wurk, "testhost:1:ffffffffffff", Outage(wurk.config.redis_url))
    assert reaper.reap() == len(goods) + len(poison)
    assert reaper.reap() == 0  # nothing moves twice
    queued = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    assert sorted(q["args"][0] for q in queued) == sorted(goods)
    assert all(q["recovered"] == 1 for q in queued)
    for member in poison:
        assert_buried_once(r, member, "NaN" if b"NaN" in member else "nesting")
    assert r.zcard("dead") == len(poison) and private_lists(r) == []


def test_the_start_up_sweep_buries_poison_and_the_recovered_jobs_run(wurk: Wurk, r: Any) -> None:
    goods, poison = fill_dead_worker(r, "deadhost:7:0123456789ab", "sweep")
    more, more_poison = fill_dead_worker(r, "deadhost:8:0123456789ab", "sweep2")
    worker = Launcher(wurk)
    worker.start()
    try:
        threads = [p.thread for p in worker.manager.processors]
        wait_for(
            lambda: sorted(json.loads(x)[0] for x in r.lrange("seen:echo", 0, -1)) == sorted(goods + more)
        )
        settle(r, worker, threads)
        assert worker.reaper is not None and worker.reaper.thread.is_alive()
    finally:
        worker.stop()
    for member in poison + more_poison:
        assert_buried_once(r, member, "NaN" if b"NaN" in member else "nesting")
    assert r.zcard("dead") == 4 and private_lists(r) == []


def test_the_reaper_buries_a_job_whose_queue_key_is_not_a_list(wurk: Wurk, r: Any) -> None:
    r.hset("queue:wrongtype", "field", "value")
    member = good_member("stuck")
    r.lpush("queue:sq|deadhost:9:0123456789ab|wrongtype", member)
    goods, _ = fill_dead_worker(r, "deadhost:10:0123456789ab", "fine")
    reaper = Reaper(wurk, "testhost:1:ffffffffffff", Outage(wurk.config.redis_url))
    assert reaper.reap() == 1 + len(goods) + 2
    assert_buried_once(r, member, "holds a hash, not a list")
    assert sorted(json.loads(x)["args"][0] for x in r.lrange("queue:default", 0, -1)) == sorted(goods)
    assert private_lists(r) == [] and r.hget("queue:wrongtype", "field") == b"value"


def test_the_reaper_recovers_each_dead_worker_whatever_its_process_key_or_name_holds(
    wurk: Wurk, r: Any
) -> None:
    """Found by the corpus: one identity whose key is a list made HGET answer WRONGTYPE, which
    ended every pass (and the start-up sweep) as if Redis were down, so no dead worker's jobs
    came back; a list whose name is not UTF-8 was skipped for good; a key named like a private
    list that is not a list also ended the pass."""
    ghosts: dict[bytes, Any] = {
        b"ghost:1:list": "LIST",
        b"ghost:2:string": "STRING",
        b"ghost:3:inf": {"beat": "inf"},
        b"ghost:4:nan": {"beat": "nan"},
        b"ghost:5:1e999": {"beat": "1e999"},
        b"ghost:\xff\xfe:6": None,
        b"ghost|x:7:000000000007": None,
        b"ghost:8:no-beat": {"info": "{}", "busy": "abc"},
    }
    r.set("queue:sq|ghost:9:not-a-list|default", "not a list")
    goods: list[str] = []
    poison: list[bytes] = []
    for n, (identity, held) in enumerate(ghosts.items()):
        if held == "LIST":
            r.rpush(identity, "x")
        elif held == "STRING":
            r.set(identity, "x")
        elif held is not None:
            r.hset(identity, mapping=held)
        bad = stored(b',"n":' + str(n).encode(), ECHO, b"[NaN]")
        good = f"ghost-{n}"
        r.rpush(b"queue:sq|" + identity + b"|default", good_member(good), bad)
        goods.append(good)
        poison.append(bad)
    live = "live:1:000000000001"
    r.hset(live, "beat", repr(time.time()))
    r.rpush(f"queue:sq|{live}|default", good_member("running"))
    reaper = Reaper(wurk, "testhost:1:ffffffffffff", Outage(wurk.config.redis_url))
    assert reaper.reap() == 2 * len(ghosts)
    assert reaper.reap() == 0
    assert sorted(json.loads(x)["args"][0] for x in r.lrange("queue:default", 0, -1)) == sorted(goods)
    for member in poison:
        assert_buried_once(r, member, "NaN")
    assert set(private_lists(r)) == {
        f"queue:sq|{live}|default".encode(),
        b"queue:sq|ghost:9:not-a-list|default",
    }
    assert r.get("queue:sq|ghost:9:not-a-list|default") == b"not a list"
    assert r.lrange("ghost:1:list", 0, -1) == [b"x"] and r.get("ghost:2:string") == b"x"


def test_a_private_list_of_a_queue_whose_name_is_not_utf8_goes_back_to_that_queue(wurk: Wurk, r: Any) -> None:
    job = good_member("binary queue")
    r.rpush(b"queue:sq|ghost:1:000000000001|\xff\xfe", job)
    reaper = Reaper(wurk, "testhost:1:ffffffffffff", Outage(wurk.config.redis_url))
    assert reaper.reap() == 1
    [back] = r.lrange(b"queue:\xff\xfe", 0, -1)
    assert json.loads(back)["args"] == ["binary queue"] and r.sismember("queues", b"\xff\xfe")


# The heartbeat ---------------------------------------------------------------------------


def test_a_counter_holding_junk_does_not_stop_the_heartbeat(
    wurk: Wurk, r: Any, launcher: Launcher, caplog: pytest.LogCaptureFixture
) -> None:
    """``stat:processed = "abc"`` made INCRBY fail in the beat's first transaction, so the process
    hash was never written again: the worker looked dead (and would be reaped) while it ran.
    The junk is left for a person to see; the counters that can be added to still are."""
    day = time.strftime("%Y-%m-%d", time.gmtime())
    r.set("stat:processed", "abc")
    r.set(f"stat:processed:{day}", "1e400")
    for i in range(3):
        jobs.echo.perform_async(f"first {i}")
    wait_for(lambda: r.llen("seen:echo") == 3)
    since = time.time()
    wait_for(lambda: float(r.hget(launcher.identity, "beat") or 0) > since)
    for i in range(3):
        jobs.echo.perform_async(f"second {i}")
    wait_for(lambda: r.llen("seen:echo") == 6)
    since = time.time()
    wait_for(lambda: float(r.hget(launcher.identity, "beat") or 0) > since)
    assert r.get("stat:processed") == b"abc" and r.get(f"stat:processed:{day}") == b"1e400"
    minute = [k for k in r.scan_iter(match="j|*") if r.hget(k, f"{ECHO}|p")]
    assert minute and sum(int(r.hget(k, f"{ECHO}|p")) for k in minute) >= 6  # the minute and its rollup
    reported = [
        rec for rec in caplog.records if rec.levelname == "ERROR" and "stat:processed" in rec.getMessage()
    ]
    # Once per counter and process, not once per beat.
    assert sorted(rec.getMessage().split(" ")[1] for rec in reported) == [
        "stat:processed",
        f"stat:processed:{day}",
    ]


# A queue key that is not a list ------------------------------------------------------


def spoil(r: Any, kind: str, key: str = "queue:bad") -> None:
    """Give a queue's key another type, as a stray SET or HSET by someone else's code would."""
    if kind == "string":
        r.set(key, "someone else's string")
    else:
        r.hset(key, "field", "value")


def unspoiled(r: Any, kind: str, key: str = "queue:bad") -> bool:
    """The user's key is exactly as they left it: never deleted, emptied or converted."""
    if kind == "string":
        return bool(r.get(key) == b"someone else's string")
    return bool(r.hgetall(key) == {b"field": b"value"})


def wrong_type_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        rec.getMessage()
        for rec in caplog.records
        if rec.levelno == logging.ERROR and rec.name == "django_wurk.fetch"
    ]


@pytest.mark.parametrize("kind", ["string", "hash"])
@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_a_queue_whose_key_is_not_a_list_does_not_wedge_the_worker(
    wurk: Wurk, r: Any, test_config: Config, caplog: pytest.LogCaptureFixture, fetch: str, kind: str
) -> None:
    """The bad queue first in strict order: every fetch meets it, and the good queue still runs.

    Before, fetch.lua (or BRPOP) failed on every fetch with WRONGTYPE and the worker backed
    off as if Redis were down, so no job of any queue ran again.
    """
    wurk.configure(test_config.replace(fetch=fetch, queues=(QueueSpec("bad"), QueueSpec("good"))))
    spoil(r, kind)
    goods = [f"good-{i}" for i in range(20)]
    with caplog.at_level(logging.INFO, logger="django_wurk"):
        for name in goods[:10]:
            jobs.echo.set(queue="good").perform_async(name)
        worker = Launcher(wurk)
        worker.start()
        try:
            threads = [p.thread for p in worker.manager.processors]
            wait_for(lambda: len(r.lrange("seen:echo", 0, -1)) == 10)
            # The queues are empty now, so the threads wait on a queue (BLMOVE/BRPOP): the
            # bad queue must not be the one they wait on, or those waits fail too.
            for name in goods[10:]:
                jobs.echo.set(queue="good").perform_async(name)
            wait_for(lambda: len(r.lrange("seen:echo", 0, -1)) == 20)
            wait_for(lambda: private_lists(r) == [])
            assert processors_alive(worker, threads)
        finally:
            worker.stop()
    assert sorted(json.loads(x)[0] for x in r.lrange("seen:echo", 0, -1)) == sorted(goods)
    [error] = wrong_type_errors(caplog)  # once per queue per interval, not once per fetch
    assert "'bad'" in error and "queue:bad" in error and f"holds a {kind}" in error
    assert "unreachable" not in caplog.text  # not mistaken for an outage
    assert unspoiled(r, kind) and r.zcard("dead") == 0


@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_a_queue_key_of_the_wrong_type_is_reported_once_per_interval_and_served_once_fixed(
    wurk: Wurk, r: Any, test_config: Config, caplog: pytest.LogCaptureFixture, fetch: str
) -> None:
    from django_wurk.core.worker.fetch import fetch_for

    config = test_config.replace(fetch=fetch, queues=(QueueSpec("bad"), QueueSpec("good")))
    fetcher = fetch_for(config, wurk.redis, wurk.scripts, "testhost:1:wrongtype")
    r.set("queue:bad", "x")
    for i in range(5):
        jobs.echo.set(queue="good").perform_async(i)
    with caplog.at_level(logging.INFO, logger="django_wurk"):
        unit = None
        got = []
        for _ in range(5):
            unit = fetcher.fetch(unit)
            assert unit is not None and unit.queue == "good"
            got.append(json.loads(unit.raw)["args"])
        assert fetcher.fetch(unit) is None and fetcher.fetch(None, slot=0) is None  # waits on "good"
        assert got == [[i] for i in range(5)]
        assert len(wrong_type_errors(caplog)) == 1
        # Past the interval it is said again (the key is still wrong)...
        fetcher.wrong_type.forget()
        assert fetcher.fetch() is None
        assert len(wrong_type_errors(caplog)) == 2
        # ...and once the owner fixes the key, the queue is served again after the recheck.
        r.delete("queue:bad")
        jobs.echo.set(queue="bad").perform_async("fixed")
        fetcher.wrong_type.forget()
        unit = fetcher.fetch()
        assert unit is not None and unit.queue == "bad"
        fetcher.acknowledge(unit)
    assert len(wrong_type_errors(caplog)) == 2
    assert r.llen("queue:sq|testhost:1:wrongtype|good") == 0
    fetcher.release()
