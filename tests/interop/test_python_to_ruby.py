"""Python pushes, Ruby runs: ``perform_async``/``perform_bulk``/``perform_in`` reach a real
Sidekiq 6.4.1 worker with identical arguments, in order, and scheduled jobs run when due."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.interop.conftest import on_versions, ruby_seen
from tests.interop.values import SAMPLES, typed
from tests.jobsapp.interop_jobs import RubyEcho, RubyStamp

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()

#: Sidekiq's scheduled-set poll interval for these tests (app.rb reads it).
FAST_POLL = {"SIDEKIQ_POLL": "0.2"}


def test_perform_async_bulk_and_scheduled_jobs_run_in_ruby_with_identical_arguments(
    wurk: Wurk, r: Any, ruby_worker: Callable[..., Any]
) -> None:
    # Started first: its poller's random boot wait (0-5 s) overlaps the pushes below.
    ruby_worker("ruby", concurrency=1, env=FAST_POLL)

    t0 = time.time()
    scheduled = {
        RubyStamp.perform_in(1.0, "in 1 s"): t0 + 1.0,
        RubyStamp.perform_in(timedelta(seconds=1.5), "in 1.5 s"): t0 + 1.5,
        RubyStamp.perform_at(datetime.fromtimestamp(t0 + 2.0, UTC), "at +2 s"): t0 + 2.0,
    }
    # Nothing is due yet, so all three wait in `schedule`, scored in epoch seconds.
    scores = {json.loads(m)["jid"]: s for m, s in r.zrange("schedule", 0, -1, withscores=True)}
    assert set(scores) == set(scheduled)
    # (a datetime holds microseconds, so perform_at's time may round down a little)
    assert all(due - 1e-6 <= scores[jid] <= due + 0.5 for jid, due in scheduled.items())
    expected = [[value] for value in SAMPLES] + [SAMPLES]
    jids = [RubyEcho.perform_async(*args) for args in expected]
    bulk = [[i, value] for i, value in enumerate(SAMPLES)]
    jids += RubyEcho.perform_bulk(bulk)
    expected += bulk
    jids.append(RubyEcho.set(tags=["last"]).perform_async("after the bulk"))
    expected.append(["after the bulk"])

    wait_for(lambda: len(ruby_seen(r)) == len(expected) + len(scheduled), timeout=30)
    seen = ruby_seen(r)
    echoes = [s for s in seen if s["class"] == "Interop::Echo"]
    # One Ruby thread, so its run order is the queue's order: FIFO, as pushed. Ruby's perform
    # got the same values with the same JSON types (Ruby re-encoded them to record them).
    assert [s["jid"] for s in echoes] == jids
    assert [typed(s["args"]) for s in echoes] == typed(expected)

    stamps = {s["jid"]: s for s in seen if s["class"] == "Interop::Stamp"}
    assert set(stamps) == set(scheduled)
    for jid, score in scores.items():
        # Ruby's poller moved it (nothing else was running) once our score said it was due.
        assert stamps[jid]["ran_at"] >= score, f"{stamps[jid]['args']} ran before it was due"
    assert r.zcard("schedule") == 0


def test_ruby_queue_api_reads_our_latency_and_enqueue_times(
    wurk: Wurk, r: Any, rb: Callable[..., Any]
) -> None:
    """Default float-seconds timestamps: ``Sidekiq::Queue`` reports sane ages for our jobs."""
    before = time.time()
    first = RubyEcho.set(queue="wire_idle").perform_async("oldest")
    RubyEcho.set(queue="wire_idle").perform_bulk([[1], [2]])
    queue = rb(op="queue", name="wire_idle")
    after = time.time()

    assert queue["size"] == 3
    # Latency is the age of the oldest job (ours, pushed a moment ago).
    assert 0 <= queue["latency"] <= after - before
    payloads = {job["jid"]: job for job in queue["jobs"]}
    oldest = payloads[first]
    assert before <= oldest["enqueued_at"] <= after and before <= oldest["created_at"] <= after
    assert 0 <= oldest["latency"] <= after - before
    assert all(before <= job["enqueued_at"] <= after for job in queue["jobs"])
    assert [job["args"] for job in queue["jobs"]] == [[2], [1], ["oldest"]]  # newest first, as Ruby lists
