"""The features that interact, tested a pair at a time on one job (issue 22's seams).

Each test runs a real worker against the test's Redis and asserts what would break if the
two features met in the wrong order or did not hear each other's outcome. The pairs tested
elsewhere, beside the feature they mostly concern:

* expiring x batch: ``test_expiring.py::test_an_expired_batch_job_counts_as_a_success``;
* encryption x error handlers:
  ``test_encryption_routes.py::test_error_and_death_handlers_reach_no_secret_from_any_exception``
  (and ``test_encryption_exits.py`` for a job's own exit);
* timeouts x status: ``test_timeouts.py`` (a tracked job that timed out reads ``retrying``
  with ``TimedOut`` as its error);
* timeouts x swarm: ``faults/test_timeouts_swarm.py``;
* signals x limiter: ``test_signals.py::test_a_rate_limited_job_neither_failed_nor_succeeded``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Config, Wurk, job, limiter
from django_wurk.api import unique_lock_owner
from django_wurk.core.features.batches import BatchCallback
from django_wurk.core.features.unique import UniqueServerMiddleware
from django_wurk.core.worker import Launcher
from django_wurk.iterable import IterableJob
from tests.conftest import wait_for
from tests.jobsapp.unique_jobs import dies_unique, flaky_unique, record, runs, sync_address

#: The one slot the unique x limiter test holds while its job tries to run.
SLOT = "pairs-slot"
#: Set by ``LockSeer`` once a batch callback has looked at the lock.
callback_ran = threading.Event()


class LockSeer(BatchCallback):
    """Records who holds the lock of the batch's one unique job when the callback runs."""

    def on_success(self, status: BatchStatus, options: dict[str, Any]) -> None:
        record("lock_seen", ["success", unique_lock_owner(sync_address, [options["n"]])])
        callback_ran.set()

    def on_death(self, status: BatchStatus, options: dict[str, Any]) -> None:
        record("lock_seen", ["death", unique_lock_owner(dies_unique, [options["n"]])])
        callback_ran.set()


class HoldsOnTheWayOut:
    """Next inside unique's middleware: holds a batch job's return (for at most 2 s) until
    a batch callback ran, which widens any window between "the batch counted the job" and
    "unique released its lock" into a certainty."""

    def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
        call_next()
        if payload.get("bid"):
            callback_ran.wait(2)


@job(unique_for=600, retry=3, wire_name="pairs.unique_limited")
def unique_limited(n: int) -> None:
    with limiter.concurrent(SLOT, 1, wait_timeout=0).within_limit():
        record("unique_limited", n)


class UniqueWalker(IterableJob):
    """Walks ``range(n)`` slowly, recording each item; at most one copy per ``n`` at a time."""

    wire_name = "pairs.UniqueWalker"
    unique_for = 600
    checkpoint_interval = 0.2

    def build_enumerator(self, n: int, *, cursor: Any) -> Iterator[tuple[int, int]]:
        for i in range(cursor or 0, n):
            yield i, i + 1

    def each_iteration(self, item: int, n: int) -> None:
        record("unique_walker", item)
        time.sleep(0.02)

    def on_complete(self, n: int) -> None:
        record("unique_walker_done", n)


def scheduled(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange("schedule", 0, -1)]


def make_due(r: Any, key: str) -> None:
    for member in r.zrange(key, 0, -1):
        r.zadd(key, {member: time.time() - 1}, xx=True)


def test_unique_x_limiter_a_rate_limited_job_keeps_its_lock(wurk: Wurk, r: Any, workers: Launcher) -> None:
    """The limiter is outside unique: unique sees ``OverLimit`` raised, not a return, so the
    lock stays with the rescheduled job and a second copy is still refused."""
    with limiter.concurrent(SLOT, 1, wait_timeout=0).within_limit():  # the only slot: taken
        jid = unique_limited.perform_async(1)
        assert jid is not None
        wait_for(lambda: r.zcard("schedule") == 1)
        [entry] = scheduled(r)
        assert entry["jid"] == jid and entry["overrated"] == 1  # rescheduled by the limiter
        assert unique_lock_owner(unique_limited, [1]) == jid  # kept while it waits
        assert unique_limited.perform_async(1) is None  # so its duplicate is dropped
        assert r.zcard("retry") == 0 and runs("unique_limited") == []
    make_due(r, "schedule")  # the slot is free now: its next run gets in
    wait_for(lambda: runs("unique_limited") == [1])
    wait_for(lambda: unique_lock_owner(unique_limited, [1]) is None)  # released at its success
    assert unique_limited.perform_async(1) is not None


def test_unique_x_batch_both_hear_the_same_outcomes(wurk: Wurk, r: Any, workers: Launcher) -> None:
    """A failure keeps the lock while the batch waits for the retry; the retry's success
    both releases the lock and succeeds the batch; a death releases it and kills the batch."""
    batch = Batch(description="unique pair")
    with batch.jobs():
        jid = flaky_unique.perform_async(31)
        flaky_unique.perform_async(31)  # its duplicate: refused when the block writes
    assert BatchStatus(batch.bid).total == 1  # the duplicate was dropped, not counted
    wait_for(lambda: BatchStatus(batch.bid).failures == 1)
    assert unique_lock_owner(flaky_unique, [31]) == jid  # kept while its retry waits
    assert not BatchStatus(batch.bid).succeeded and BatchStatus(batch.bid).pending == 1
    wait_for(lambda: BatchStatus(batch.bid).succeeded, timeout=15)  # the retry (1 s later) ran
    assert runs("flaky_unique") == [31]
    wait_for(lambda: unique_lock_owner(flaky_unique, [31]) is None)

    doomed = Batch(description="unique death")
    with doomed.jobs():
        dead = dies_unique.perform_async(32)
    wait_for(lambda: BatchStatus(doomed.bid).dead_jids == [dead])
    wait_for(lambda: unique_lock_owner(dies_unique, [32]) is None)  # an automatic death releases
    assert BatchStatus(doomed.bid).died and not BatchStatus(doomed.bid).succeeded


def test_unique_x_batch_a_success_callback_finds_the_lock_released(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    """A batch's ``success`` callback may push the same unique job again (the next round):
    the lock must be gone by then, so unique releases it before the batch counts the job."""
    callback_ran.clear()
    wurk.server_middleware.insert_after(UniqueServerMiddleware, HoldsOnTheWayOut)
    batch = Batch(description="release first")
    batch.on("success", LockSeer, {"n": 41})
    with batch.jobs():
        sync_address.perform_async(41)
    wait_for(lambda: runs("lock_seen"))
    assert runs("lock_seen") == [["success", None]]


def test_unique_x_batch_a_death_callback_finds_the_lock_released(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    """The same on the death path: the death handlers release the lock before the batch's
    pushes its ``death`` callback."""
    callback_ran.clear()
    batch = Batch(description="release first, dead")
    batch.on("death", LockSeer, {"n": 42})
    with batch.jobs():
        dies_unique.perform_async(42)
    wait_for(lambda: runs("lock_seen"))
    assert runs("lock_seen") == [["death", None]]


def test_iterable_x_unique_an_interrupted_job_keeps_its_lock_and_resumes(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    """``Interrupted`` is no success: unique keeps the lock of a job the stop put back, so a
    copy pushed meanwhile is dropped, and the job itself resumes from its cursor and then
    releases it."""
    wurk.configure(test_config.replace(concurrency=1))
    first = Launcher(wurk)
    first.start()
    try:
        jid = UniqueWalker.perform_async(200)
        assert jid is not None
        wait_for(lambda: r.llen("seen:unique_walker") >= 5)
    finally:
        first.stop()  # TERM: the job saves its cursor and goes back to its queue
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]
    done = len(runs("unique_walker"))
    assert 5 <= done < 200 and runs("unique_walker_done") == []
    assert r.zcard("retry") == 0  # not a failure
    assert unique_lock_owner(UniqueWalker, [200]) == jid  # not a success either
    assert UniqueWalker.perform_async(200) is None
    second = Launcher(wurk)
    second.start()
    try:
        wait_for(lambda: runs("unique_walker_done") == [200], timeout=30)
        wait_for(lambda: unique_lock_owner(UniqueWalker, [200]) is None)
    finally:
        second.stop()
    assert runs("unique_walker") == list(range(200))  # resumed where it stopped: none twice
    assert wurk.redis.llen("queue:default") == 0


# Debounce and throttle (``collapse``) ------------------------------------------------------------


@job(debounce=2, collapse_key="pairs", retry=3, wire_name="pairs.debounced_limited")
def debounced_limited(note: str) -> None:
    with limiter.concurrent(SLOT, 1, wait_timeout=0).within_limit():
        record("debounced_limited", note)


def test_collapse_x_unique_they_cannot_meet_on_one_job() -> None:
    """Both gates decide "is this push another copy"; a lock taken by a push the collapse then
    replaces would name a jid that never runs, so the pair is refused where it is written."""
    with pytest.raises(ValueError, match="debounce and unique_for cannot be used together"):
        debounced_limited.set(unique_for=60)
    with pytest.raises(ValueError, match="throttle and unique_for cannot be used together"):
        sync_address.set(throttle=60)
    assert sync_address.set(throttle=60, unique_for=False) is not None  # a forced push may


def test_collapse_x_limiter_a_fired_burst_rate_limited_is_rescheduled_not_collapsed_again(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    """The limiter reschedules the fired job under its jid (a plain write, no gate): nothing
    collapses it again, a push meanwhile starts a new burst, and each runs once."""
    with limiter.concurrent(SLOT, 1, wait_timeout=0).within_limit():  # the only slot: taken
        first = debounced_limited.perform_async("a")
        assert debounced_limited.perform_async("b") == first  # one burst: "b" replaces "a"
        wait_for(lambda: [(e["jid"], e.get("overrated")) for e in scheduled(r)] == [(first, 1)], timeout=30)
        assert scheduled(r)[0]["args"] == ["b"]
        second = debounced_limited.perform_async("c")  # the first burst fired: a new one
        assert second not in (None, first)
        # It fired too, and was rescheduled: both wait, each once, before the slot frees.
        both = sorted([(first, 1), (second, 1)])
        wait_for(lambda: sorted((e["jid"], e.get("overrated")) for e in scheduled(r)) == both, timeout=30)
    # The slot is free, but holds one at a time: the one that lost the race is rescheduled
    # again, so each pass makes the schedule due until both ran.
    wait_for(lambda: make_due(r, "schedule") or sorted(runs("debounced_limited")) == ["b", "c"], timeout=60)
    wait_for(lambda: r.zcard("schedule") == 0 and r.llen("queue:default") == 0)
    assert sorted(runs("debounced_limited")) == ["b", "c"]
