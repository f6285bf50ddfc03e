"""Job timestamps across versions: float seconds (the default) are read right by Sidekiq 6.4;
``TIMESTAMPS="ms"`` writes Sidekiq 8's shape, which 6.4 misreads; our reader takes both.

The one real fork in the wire format (docs/interop.md, "Which settings for which Sidekiq"):
Sidekiq <= 7 writes ``created_at``/``enqueued_at``/``failed_at``/``retried_at`` as float
epoch seconds, Sidekiq 8 as integer epoch milliseconds. Sorted-set scores are seconds in
every version and style.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import DeadSet, JobRecord, Queue, RetrySet
from django_wurk.core import wire
from django_wurk.core.wire import TimestampStyle
from tests.conftest import wait_for
from tests.interop.conftest import on_versions, ruby_seen
from tests.interop.values import shape
from tests.jobsapp.interop_jobs import Fail, Record, RubyEcho, RubyStamp

MS = TimestampStyle.INT_MILLISECONDS
#: Sidekiq's scheduled-set poll interval when a Ruby worker runs here (app.rb reads it).
FAST_POLL = {"SIDEKIQ_POLL": "0.2"}

# Composed payloads (values made up; key order and JSON types as Sidekiq's client.rb,
# job_util.rb and job_retry.rb write them). (a) plain job, 8.x; (b) the same, 6.4/7.x;
# (c) scheduled, 8.x; (d) after two failed retries, 8.x; (f) dead after three retries, 8.x.
VECTOR_A = """{"retry":true,"queue":"default","args":[1,"two",{"k":3.5}],"class":"HardJob",
"jid":"b4a577edbccf1d805744efa9","created_at":1767225600123,"enqueued_at":1767225600125}"""
VECTOR_B = """{"retry":true,"queue":"default","args":[1,"two",{"k":3.5}],"class":"HardJob",
"jid":"b4a577edbccf1d805744efa9","created_at":1767225600.1234567,"enqueued_at":1767225600.1251302}"""
VECTOR_C = """{"retry":5,"queue":"critical","args":["later"],"class":"ReportJob",
"jid":"0f6e5a1c9b2d3e4f5a6b7c8d","created_at":1767225600500}"""
VECTOR_D = """{"retry":true,"queue":"default","backtrace":true,"args":[7],"class":"HardJob",
"jid":"3c1f0e2d4b5a69788796a5b4","created_at":1767225600000,"enqueued_at":1767225760100,
"error_message":"boom 7","error_class":"ArgumentError","failed_at":1767225600200,"retry_count":2,
"error_backtrace":"eJyLVkosKNDPyk8q1s9ILEqJB7L0ipKszK0y8xQSClKL0vKLctWVdJSKM1NSszML9QuK8pNTi4vzi0CqjIwMwOpSK1KTS0tSQZrVlWIBzP4dJw==",
"retried_at":1767225760150}"""
VECTOR_F = """{"retry":3,"queue":"default","args":[7],"class":"FlakyJob","jid":"9a8b7c6d5e4f3a2b1c0d9e8f",
"created_at":1767225600000,"enqueued_at":1767311990000,"error_message":"still broken",
"error_class":"RuntimeError","failed_at":1767225601000,"retry_count":3,"retried_at":1767312000740}"""


def vector(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value


def members(r: Any, key: str) -> dict[str, tuple[dict[str, Any], float]]:
    """A sorted set's entries by jid: (payload, score)."""
    return {json.loads(m)["jid"]: (json.loads(m), s) for m, s in r.zrange(key, 0, -1, withscores=True)}


def make_due(r: Any, jids: set[str]) -> None:
    """Pull these retry entries' scores into the past, so the poller promotes them now."""
    for member, _ in r.zrange("retry", 0, -1, withscores=True):
        if json.loads(member)["jid"] in jids:
            r.zadd("retry", {member: time.time() - 1}, xx=True)


def retry_counts(r: Any) -> dict[str, int]:
    return {jid: payload["retry_count"] for jid, (payload, _) in members(r, "retry").items()}


def test_sidekiq_64_reads_our_float_timestamps_as_now(
    wurk: Wurk, r: Any, rb: Callable[..., Any], start_python_worker: Callable[..., Any]
) -> None:
    before = time.time()
    queued = Record.set(queue="wire_idle").perform_async(1, "two", {"k": 3.5})
    scheduled = Record.perform_in(3600, "later")
    start_python_worker()
    retried = Fail.perform_async(1)
    dead = Fail.set(retry=0).perform_async(2)
    assert queued and scheduled and retried and dead
    wait_for(lambda: r.zcard("retry") == 1 and r.zcard("dead") == 1)
    ours = {jid: p for key in ("retry", "dead") for jid, (p, _) in members(r, key).items()}

    where = {queued: "queue:wire_idle", scheduled: "schedule", retried: "retry", dead: "dead"}
    times = rb(op="job_times", jobs=[{"where": w, "jid": jid} for jid, w in where.items()])
    queue = rb(op="queue", name="wire_idle")
    elapsed = time.time() - before
    read = {t["jid"]: t for t in times}

    # The 6.4/7.x shape exactly: float seconds (vector b).
    [stored] = [json.loads(x) for x in r.lrange("queue:wire_idle", 0, -1)]
    assert shape(stored) == shape(vector(VECTOR_B))

    def fresh(stamp: dict[str, Any] | None) -> bool:
        """Ruby's Time for a stamp written during this test: now-ish, this year."""
        return stamp is not None and 0 <= stamp["age"] <= elapsed and stamp["year"] == datetime.now(UTC).year

    assert 0 <= queue["latency"] <= elapsed
    for jid in (queued, retried, dead):
        assert fresh(read[jid]["created_at"]) and fresh(read[jid]["enqueued_at"]), where[jid]
        assert 0 <= read[jid]["latency"] <= elapsed, where[jid]
    assert fresh(read[scheduled]["created_at"]) and read[scheduled]["enqueued_at"] is None
    assert read[scheduled]["at"]["epoch"] == pytest.approx(before + 3600, abs=elapsed)
    for jid in (retried, dead):
        # The Web UI's Time.at(failed_at): the very instant we stored.
        assert fresh(read[jid]["failed_at"]) and read[jid]["retried_at"] is None
        assert read[jid]["failed_at"]["epoch"] == pytest.approx(ours[jid]["failed_at"], abs=1e-6)


def test_ms_timestamps_match_sidekiq_8s_payload_shapes(
    wurk: Wurk, r: Any, start_python_worker: Callable[..., Any]
) -> None:
    """Key set, key order and JSON types of what we write with ``TIMESTAMPS="ms"`` equal the
    Sidekiq 8 payloads (a), (c), (d) and (f) above."""
    start_python_worker(timestamps=MS)
    before = time.time()
    queued = Record.set(queue="wire_idle").perform_async(1, "two", {"k": 3.5})
    scheduled = Record.set(retry=5, queue="critical").perform_in(3600, "later")
    hard = Fail.set(backtrace=True).perform_async(7)  # will fail three times: retry_count 2
    flaky = Fail.set(retry=3).perform_async(7)  # four times: exhausted, dead
    assert queued and scheduled and hard and flaky

    wait_for(lambda: retry_counts(r) == {hard: 0, flaky: 0})
    for count in (1, 2):
        make_due(r, {hard, flaky})
        wait_for(lambda c=count: retry_counts(r) == {hard: c, flaky: c})  # type: ignore[misc]
    make_due(r, {flaky})
    wait_for(lambda: r.zcard("dead") == 1)

    [stored] = [json.loads(x) for x in r.lrange("queue:wire_idle", 0, -1)]
    [(in_schedule, schedule_score)] = members(r, "schedule").values()
    [(in_retry, _)] = members(r, "retry").values()
    [(in_dead, dead_score)] = members(r, "dead").values()
    assert shape(stored) == shape(vector(VECTOR_A))
    assert shape(in_schedule) == shape(vector(VECTOR_C))
    assert shape(in_retry) == shape(vector(VECTOR_D))
    assert shape(in_dead) == shape(vector(VECTOR_F))
    assert in_retry["jid"] == hard and in_dead["jid"] == flaky and in_schedule["jid"] == scheduled

    # Integer milliseconds of now; scores stay float seconds in this style too.
    now_ms = time.time() * 1000
    for payload in (stored, in_schedule, in_retry, in_dead):
        for field in ("created_at", "enqueued_at", "failed_at", "retried_at"):
            if field in payload:
                assert before * 1000 - 1 <= payload[field] <= now_ms, field
    assert schedule_score == pytest.approx(before + 3600, abs=5)
    assert dead_score == pytest.approx(time.time(), abs=5)
    assert in_dead["failed_at"] <= in_dead["retried_at"] and in_retry["failed_at"] <= in_retry["retried_at"]


def test_our_reader_takes_each_field_in_either_style(
    wurk: Wurk, r: Any, rb: Callable[..., Any], start_python_worker: Callable[..., Any]
) -> None:
    # Made up: a job created by a 7.x client (float seconds) that failed on an 8.x worker (int ms).
    mixed = JobRecord(
        wire.dumps(
            {**vector(VECTOR_B), "created_at": 1767225600.25, "failed_at": 1767225601500, "retry_count": 0}
        ).encode()
    )
    assert mixed.created_at == 1767225600.25 and mixed.failed_at == 1767225601.5
    assert mixed.enqueued_at == 1767225600.1251302
    assert JobRecord(VECTOR_D.encode()).retried_at == 1767225760.15
    assert JobRecord(VECTOR_D.encode()).created_at == 1767225600.0

    # Real: Ruby 6.4 pushes (float seconds); our worker, set to ms, fails it (int ms).
    before = time.time()
    start_python_worker("wire_mixed", timestamps=MS)
    [jid] = rb(op="pushes", calls=[{"push": {"class": Fail.wire_name, "queue": "wire_mixed", "args": [1]}}])
    wait_for(lambda: r.zcard("retry") == 1)
    [(payload, _)] = members(r, "retry").values()
    assert isinstance(payload["created_at"], float) and isinstance(payload["enqueued_at"], float)
    assert isinstance(payload["failed_at"], int)
    [entry] = list(RetrySet(wurk))
    assert entry.jid == jid
    assert entry.created_at == payload["created_at"] and entry.enqueued_at == payload["enqueued_at"]
    assert entry.failed_at == payload["failed_at"] / 1000
    for stamp in (entry.created_at, entry.enqueued_at, entry.failed_at):
        assert stamp is not None and before - 1 <= stamp <= time.time()


@on_versions("6.4.1", "7.3")  # 8.0 reads integers as milliseconds: test_fleet.py
def test_sidekiq_64_and_7_misread_int_ms_timestamps_but_still_run_the_jobs(
    wurk: Wurk, r: Any, rb: Callable[..., Any], ruby_worker: Callable[..., Any], test_config: Any
) -> None:
    """Known difference (docs/interop.md, "Which settings"): 6.x/7.x take every job timestamp for
    seconds, so ``TIMESTAMPS="ms"`` is for fleets where every Ruby process and Web UI is 8.x."""
    wurk.configure(test_config.replace(timestamps=MS))
    ruby_worker("ruby", concurrency=1, env=FAST_POLL)
    before = time.time()
    queued = RubyEcho.set(queue="wire_idle").perform_async("ms")
    scheduled = RubyEcho.perform_in(3600, "later")
    ran = RubyEcho.perform_async("runs")
    ran_later = RubyStamp.perform_in(1.0, "scheduled")

    times = {
        t["jid"]: t
        for t in rb(
            op="job_times",
            jobs=[{"where": "queue:wire_idle", "jid": queued}, {"where": "schedule", "jid": scheduled}],
        )
    }
    queue = rb(op="queue", name="wire_idle")
    our_latency = Queue("wire_idle", wurk).latency()
    elapsed = time.time() - before

    # 6.4 and 7.3 read milliseconds as seconds: enqueued ~56,000 years from now, a latency of about
    # -1.8e12 s (the dumps in §12 show -1794171044622.36), where our own API says "just now".
    assert queue["latency"] < -1e12
    assert queue["latency"] == pytest.approx(before - before * 1000, rel=1e-6)
    for field in ("created_at", "enqueued_at"):
        assert times[queued][field]["year"] > 50_000
    assert times[scheduled]["created_at"]["year"] > 50_000
    assert 0 <= our_latency <= elapsed + 0.001  # + the millisecond the stamp is truncated to
    # Scores are seconds in every style, so 6.4's scheduled set still reads the due time right...
    assert times[scheduled]["at"]["epoch"] == pytest.approx(before + 3600, abs=elapsed)

    # ...and its worker and poller still run our jobs (timestamps are only displayed).
    wait_for(lambda: {s["jid"] for s in ruby_seen(r)} == {ran, ran_later}, timeout=30)
    assert {tuple(s["args"]) for s in ruby_seen(r)} == {("runs",), ("scheduled",)}
    [stamped] = [s for s in ruby_seen(r) if s["jid"] == ran_later]
    assert stamped["ran_at"] >= before + 1.0
    assert DeadSet(wurk).size() == 0 and RetrySet(wurk).size() == 0
