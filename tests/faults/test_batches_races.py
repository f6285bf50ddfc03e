"""Batches under concurrency and crashes: real worker processes, killed with SIGKILL.

Every count change is one Lua step, so however the last jobs' acknowledgements interleave,
exactly one of them sees the batch drained; a job that runs twice (recovered from a dead
worker's private list) is counted once.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Wurk
from django_wurk.core.features.batches.script import run
from tests.conftest import wait_for
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder, runs


def fired(r: Any, bid: str) -> Counter[str]:
    return Counter(c["event"] for c in runs("callbacks") if c["bid"] == bid)


def acknowledge_at_once(wurk: Wurk, jobs: list[tuple[str, str | None]], threads: int, runs: int = 1) -> None:
    """Acknowledge each (bid, jid) ``runs`` times (a duplicate run after the first), sharing them
    between ``threads`` threads that are all released at the same instant."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def ack(share: list[tuple[str, str | None]]) -> None:
        try:
            start.wait()
            for bid, jid in share:
                for _ in range(runs):
                    run(wurk, "success", bid, str(jid))
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=ack, args=(jobs[i::threads],)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    assert not errors


def test_acknowledgements_racing_from_many_threads_fire_each_callback_once(wurk: Wurk, r: Any) -> None:
    """The script alone, hammered: 20 threads acknowledge 1,000 jobs, five times over."""
    for _ in range(5):
        r.delete("queue:cb")
        batch = Batch(callback_queue="cb")
        batch.on("complete", Recorder)
        batch.on("success", Recorder)
        with batch.jobs():
            jids = batch_jobs.work.set(queue="nobody-listens").perform_bulk([[i] for i in range(1000)])
        acknowledge_at_once(wurk, [(batch.bid, jid) for jid in jids], threads=20, runs=2)
        events = Counter(json.loads(x)["args"][1][0] for x in r.lrange("queue:cb", 0, -1))
        assert events == {"complete": 1, "success": 1}
        status = BatchStatus(batch.bid)
        assert status.total == 1000 and status.pending == 0 and status.succeeded


def test_sibling_children_finishing_together_fire_their_parent_once(wurk: Wurk, r: Any) -> None:
    """Twenty children of one job each, their last jobs acknowledged at the same instant."""
    for _ in range(5):
        r.delete("queue:cb")
        parent = Batch(callback_queue="cb")
        parent.on("complete", Recorder)
        parent.on("success", Recorder)
        children: list[tuple[str, str | None]] = []
        with parent.jobs():
            for i in range(20):
                child = Batch(callback_queue="cb")
                with child.jobs():
                    [jid] = batch_jobs.work.set(queue="nobody-listens").perform_bulk([[i]])
                children.append((child.bid, jid))
        acknowledge_at_once(wurk, children, threads=len(children))
        fired = [json.loads(x)["args"] for x in r.lrange("queue:cb", 0, -1)]
        assert Counter(bid for bid, _ in fired) == {parent.bid: 2}
        status = BatchStatus(parent.bid)
        assert status.complete and status.succeeded and status.child_count == 20


@pytest.mark.slow
def test_two_processes_of_ten_threads_finish_a_thousand_jobs_and_fire_each_callback_once(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    workers = [spawn_worker("-c", "10"), spawn_worker("-c", "10")]
    try:
        for _ in range(3):
            batch = Batch(description="race")
            for event in ("complete", "success", "death"):
                batch.on(event, Recorder)
            with batch.jobs():
                batch_jobs.work.perform_bulk([[i] for i in range(1000)])
            wait_for(lambda b=batch: fired(r, b.bid)["success"] == 1, timeout=120)
            status = BatchStatus(batch.bid)
            assert status.total == 1000 and status.pending == 0 and status.failures == 0
            assert status.complete and status.succeeded and not status.died
        # Let any duplicate show up before counting.
        wait_for(lambda: r.llen("queue:default") == 0 and all(w.poll() is None for w in workers), timeout=30)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            assert w.wait(30) == 0
    by_batch: dict[str, Counter[str]] = {}
    for c in runs("callbacks"):
        by_batch.setdefault(c["bid"], Counter())[c["event"]] += 1
    assert len(by_batch) == 3
    assert all(events == {"complete": 1, "success": 1} for events in by_batch.values())
    assert Counter(bid for _, bid in runs("work")) == {bid: 1000 for bid in by_batch}  # each job ran once


@pytest.mark.slow
def test_a_worker_killed_mid_batch_leaves_the_counts_right(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    batch = Batch()
    for event in ("complete", "success", "death"):
        batch.on(event, Recorder)
    with batch.jobs():
        batch_jobs.work.perform_bulk([[i, 0.1] for i in range(60)])
    victim = spawn_worker("-c", "5")
    wait_for(lambda: len(runs("work")) >= 10, timeout=30)  # mid-batch: some done, five running
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    status = BatchStatus(batch.bid)
    assert 0 < status.pending < 60 and not status.complete
    in_flight = sum(r.llen(k) for k in r.scan_iter(match="queue:sq|*"))
    assert in_flight > 0  # the killed worker's jobs wait in its private list
    rescuer = spawn_worker("-c", "5")
    try:
        wait_for(lambda: fired(r, batch.bid)["success"] == 1, timeout=60)
    finally:
        rescuer.send_signal(signal.SIGTERM)
        assert rescuer.wait(30) == 0
    status.reload()
    assert status.total == 60 and status.pending == 0 and status.failures == 0 and status.succeeded
    assert fired(r, batch.bid) == {"complete": 1, "success": 1}
    done = Counter(n for n, _ in runs("work"))
    assert set(done) == set(range(60))
    assert sum(done.values()) - 60 <= in_flight  # only the interrupted jobs ran twice
