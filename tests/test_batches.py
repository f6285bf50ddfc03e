"""Batches with real workers and a real Redis: counting, callbacks, failures and deaths.

Each test pushes a batch, runs an in-process worker (``Launcher``) and waits, with a
deadline, for what the callbacks recorded in Redis. Races between processes, nesting,
TTLs and the transaction rules have their own files (``test_batches_*.py``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Wurk
from django_wurk.core.api import DeadSet, RetrySet
from django_wurk.core.features.batches import BatchClosed, BatchError, NoSuchBatch, keys
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import FailsTwice, Recorder, runs


@pytest.fixture
def launcher(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def callbacks(event: str | None = None) -> list[dict[str, Any]]:
    return [c for c in runs("callbacks") if event is None or c["event"] == event]


def settled(r: Any, worker: Launcher) -> None:
    """Wait until nothing is queued, due for a retry, fetched or running: nothing more can fire."""

    def idle() -> bool:
        fetched = any(r.llen(key) for key in r.scan_iter(match="queue:sq|*"))
        return not fetched and r.llen("queue:default") == 0 and r.zcard("retry") == 0

    wait_for(lambda: idle() and not worker.manager.work.snapshot() and idle())


def make_due(r: Any, key: str = "retry") -> None:
    for member, _ in r.zrange(key, 0, -1, withscores=True):
        r.zadd(key, {member: time.time() - 1}, xx=True)


def batch_keys(r: Any, bid: str) -> list[str]:
    return sorted(k.decode() for k in r.scan_iter(match=f"b-{bid}*"))


def test_a_new_batch_writes_nothing_until_its_jobs_block(wurk: Wurk, r: Any) -> None:
    batch = Batch(description="Import 2026-01")
    batch.on("success", Recorder, {"user_id": 1})
    assert isinstance(batch.bid, str) and len(batch.bid) == 14
    assert r.dbsize() == 0
    assert not BatchStatus(batch.bid).exists


def test_success_and_complete_fire_once_after_every_job_ran(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch(description="Import 2026-01")
    batch.on("success", Recorder, {"user_id": 1})
    batch.on("complete", Recorder)
    with batch.jobs():
        jids = [batch_jobs.work.perform_async(i) for i in range(20)]
    assert all(jids)
    status = BatchStatus(batch.bid)
    assert status.exists and status.total == 20 and status.description == "Import 2026-01"
    wait_for(lambda: len(callbacks()) == 2)
    assert sorted(n for n, _ in runs("work")) == list(range(20))
    assert {bid for _, bid in runs("work")} == {batch.bid}  # Batch.current() inside the jobs
    done = {c["event"]: c for c in callbacks()}
    assert done["success"]["options"] == {"user_id": 1} and done["complete"]["options"] == {}
    assert done["success"]["bid"] == batch.bid and done["success"]["pending"] == 0
    assert done["success"]["total"] == 20 and done["success"]["complete"] is True
    status = BatchStatus(batch.bid)
    assert status.complete and status.succeeded and not status.died
    assert (
        status.pending == 0 and status.failures == 0 and status.failed_jids == [] and status.dead_jids == []
    )
    assert status.created_at and status.complete_at and status.success_at
    assert status.created_at <= status.complete_at <= status.success_at
    # Nothing fires twice: once the worker is idle, nothing more can.
    settled(r, launcher)
    assert len(callbacks()) == 2
    # The payloads kept their bid (Ruby processes and Sidekiq's Web UI see normal jobs).
    assert r.zcard("batches") == 1


def test_callback_jobs_are_ordinary_jobs_on_the_callback_queue(wurk: Wurk, r: Any) -> None:
    batch = Batch(callback_queue="callbacks")
    batch.on("complete", Recorder, {"n": 1})
    batch.on("complete", "tests.jobsapp.batch_jobs.Recorder#finished")
    with batch.jobs():
        pass  # an empty block still fires its callbacks
    queued = [json.loads(x) for x in reversed(r.lrange("queue:callbacks", 0, -1))]
    assert [p["args"] for p in queued] == [
        [batch.bid, ["complete", "tests.jobsapp.batch_jobs.Recorder", {"n": 1}]],
        [batch.bid, ["complete", "tests.jobsapp.batch_jobs.Recorder#finished", {}]],
    ]
    first = queued[0]
    assert first["class"] == "django_wurk.BatchCallbackJob" and first["retry"] is True
    assert first["display_class"] == "tests.jobsapp.batch_jobs.Recorder#on_complete"
    assert len(first["jid"]) == 24 and int(first["jid"], 16) >= 0
    assert isinstance(first["created_at"], float) and first["enqueued_at"] == first["created_at"]
    assert "bid" not in first  # a top-level batch's callbacks belong to no batch
    assert r.sismember("queues", "callbacks")


def test_an_empty_block_fires_complete_and_success(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    batch.on("complete", Recorder)
    batch.on("success", Recorder)
    with batch.jobs():
        pass
    wait_for(lambda: len(callbacks()) == 2)
    assert {c["event"] for c in callbacks()} == {"complete", "success"}
    assert BatchStatus(batch.bid).total == 0


def test_a_block_that_raises_enqueues_nothing(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    batch.on("complete", Recorder)
    with pytest.raises(ZeroDivisionError), batch.jobs():
        batch_jobs.work.perform_async(1)
        batch_jobs.work.perform_bulk([[2], [3]])
        batch_jobs.work.perform_in(60, 4)
        1 / 0  # noqa: B018
    assert r.dbsize() == 0
    # The same batch can still be written by a later block.
    with batch.jobs():
        batch_jobs.work.perform_async(5)
    assert BatchStatus(batch.bid).total == 1 and r.llen("queue:default") == 1


def test_a_nested_block_that_raises_drops_only_its_own_jobs(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with batch.jobs():
        batch_jobs.work.perform_async(1)
        child = Batch()
        with pytest.raises(KeyError), child.jobs():
            batch_jobs.work.perform_async(2)
            raise KeyError("child")
        batch_jobs.work.perform_async(3)
    status = BatchStatus(batch.bid)
    assert status.total == 2 and status.child_count == 0
    assert not BatchStatus(child.bid).exists
    assert sorted(json.loads(x)["args"][0] for x in r.lrange("queue:default", 0, -1)) == [1, 3]


def test_pushes_inside_the_block_carry_the_bid_and_are_counted_once(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with batch.jobs():
        batch_jobs.work.perform_async(1)
        batch_jobs.work.perform_bulk([[2], [3]])
        batch_jobs.work.perform_in(3600, 4)
        batch_jobs.work.set(queue="other").perform_async(5)
    status = BatchStatus(batch.bid)
    assert status.total == 5 and status.pending == 5 and len(status.pending_jids) == 5
    queued = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    scheduled = [json.loads(x) for x in r.zrange("schedule", 0, -1)]
    other = [json.loads(x) for x in r.lrange("queue:other", 0, -1)]
    assert {p["bid"] for p in queued + scheduled + other} == {batch.bid}
    assert len(queued) == 3 and len(scheduled) == 1 and len(other) == 1
    assert "enqueued_at" not in scheduled[0] and all("enqueued_at" in p for p in queued)
    assert r.sismember("queues", "other")
    # A push outside the block is a normal job.
    batch_jobs.work.perform_async(6)
    assert "bid" not in json.loads(r.lindex("queue:default", 0))


def test_a_failing_job_is_retried_without_being_counted_again(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    batch.on("success", Recorder)
    with batch.jobs():
        batch_jobs.flaky.perform_async(1)
        batch_jobs.work.perform_async(2)
    wait_for(lambda: r.zcard("retry") == 1)
    status = BatchStatus(batch.bid)
    wait_for(lambda: status.reload().pending == 1)
    assert status.total == 2 and status.failures == 1 and len(status.failed_jids) == 1 and not status.complete
    make_due(r)  # the retry comes back through the poller and the client middleware
    wait_for(lambda: callbacks("success"))
    status.reload()
    assert status.total == 2 and status.pending == 0 and status.failures == 0 and status.succeeded
    assert callbacks("success")[0]["failures"] == 0


def test_a_death_fires_death_and_complete_but_never_success(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    for event in ("complete", "success", "death"):
        batch.on(event, Recorder)
    with batch.jobs():
        batch_jobs.work.perform_async(1)
        dead_jid = batch_jobs.dies.perform_async(2)
        batch_jobs.dies.perform_async(3)
    wait_for(lambda: {c["event"] for c in callbacks()} == {"death", "complete"})
    settled(r, launcher)
    assert Counter(c["event"] for c in callbacks()) == {"death": 1, "complete": 1}
    status = BatchStatus(batch.bid)
    assert status.total == 3 and status.pending == 2 and status.failures == 2 and status.dead == 2
    assert dead_jid in status.dead_jids and status.complete and status.died and not status.succeeded
    assert r.zscore("dead-batches", batch.bid) is not None
    assert r.zcard("dead") == 2


@pytest.mark.parametrize("job_name", ["dropped", "discarded", "killed"])
def test_every_terminal_outcome_is_a_death(wurk: Wurk, r: Any, launcher: Launcher, job_name: str) -> None:
    batch = Batch()
    batch.on("death", Recorder)
    batch.on("complete", Recorder)
    with batch.jobs():
        if job_name == "dropped":
            batch_jobs.dropped.perform_async(1)  # retry: False
        elif job_name == "discarded":
            batch_jobs.dies.set(dead=False).perform_async(1)  # dead: False discards
        else:
            batch_jobs.flaky.perform_in(3600, 99)
    if job_name == "killed":  # killed from the schedule by the API
        from django_wurk.core.api import ScheduledSet

        [entry] = list(ScheduledSet())
        assert entry.kill()
    wait_for(lambda: len(callbacks()) == 2)
    assert BatchStatus(batch.bid).died


def test_a_dead_job_retried_from_the_morgue_rejoins_and_success_fires(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    batch = Batch()
    batch.on("success", Recorder)
    batch.on("complete", Recorder)
    batch.on("death", Recorder)
    with batch.jobs():
        batch_jobs.fixed_later.perform_async(1)
        batch_jobs.work.perform_async(2)
    wait_for(lambda: len(callbacks()) == 2)
    assert {c["event"] for c in callbacks()} == {"death", "complete"}
    assert r.zscore("dead-batches", batch.bid) is not None
    r.set("fixed", "1")
    [entry] = list(DeadSet())
    assert entry.retry()
    wait_for(lambda: callbacks("success"))
    status = BatchStatus(batch.bid)
    assert status.total == 2 and status.pending == 0 and status.failures == 0 and status.dead == 0
    assert status.succeeded and r.zscore("dead-batches", batch.bid) is None
    settled(r, launcher)
    assert Counter(c["event"] for c in callbacks()) == {"death": 1, "complete": 1, "success": 1}


def test_a_running_job_adds_jobs_to_its_own_batch(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    batch.on("success", Recorder)
    with batch.jobs():
        batch_jobs.Grows.perform_async(5)
    wait_for(lambda: callbacks("success"))
    assert callbacks("success")[0]["total"] == 6
    assert sorted(n for n, _ in runs("work")) == [1000, 1001, 1002, 1003, 1004]
    assert runs("grows") == [batch.bid]


def test_a_callback_that_fails_is_retried(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    batch.on("complete", FailsTwice, {"k": "v"})
    with batch.jobs():
        batch_jobs.work.perform_async(1)
    for attempt in (1, 2):
        wait_for(lambda a=attempt: int(r.get(f"fails-twice:{batch.bid}") or 0) == a and r.zcard("retry") == 1)
        [entry] = list(RetrySet())
        assert entry.payload is not None and entry.payload["class"] == "django_wurk.BatchCallbackJob"
        make_due(r)
    wait_for(lambda: callbacks("complete"))
    assert callbacks("complete") == [{"event": "complete", "bid": batch.bid, "options": {"k": "v"}}]
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0


def test_an_unknown_callback_goes_to_the_dead_set_with_the_reason(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    batch.on("complete", "os.system")  # not a registered BatchCallback: never imported, never run
    with batch.jobs():
        batch_jobs.work.perform_async(1)
    # As if written by another process that knows the class but not the method.
    r.rpush(keys.callbacks(batch.bid), '["success","tests.jobsapp.batch_jobs.Recorder#nope",{}]')
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: r.zcard("dead") == 2)
    finally:
        worker.stop()
    dead = {json.loads(m)["args"][1][1]: json.loads(m) for m in r.zrange("dead", 0, -1)}
    assert dead["os.system"]["error_class"] == "UnknownBatchCallback"
    assert "no BatchCallback is registered as 'os.system'" in dead["os.system"]["error_message"]
    assert "has no method nope()" in dead["tests.jobsapp.batch_jobs.Recorder#nope"]["error_message"]
    assert r.zcard("retry") == 0


def test_on_checks_its_arguments(wurk: Wurk) -> None:
    batch = Batch()
    with pytest.raises(ValueError, match="batch event must be one of"):
        batch.on("done", Recorder)
    with pytest.raises(ValueError, match="BatchCallback subclass"):
        batch.on("complete", dict)
    with pytest.raises(ValueError, match=r"must be 'pkg\.module\.Class'"):
        batch.on("complete", "not a path")
    with pytest.raises(ValueError, match=r"must be 'pkg\.module\.Class'"):
        batch.on("complete", "pkg.Cls#_private")
    with pytest.raises(ValueError, match="has no method on_death"):
        batch.on("death", FailsTwice)
    with pytest.raises(ValueError, match="has no method nope"):
        batch.on("death", "tests.jobsapp.batch_jobs.Recorder#nope")
    with pytest.raises(TypeError, match="not JSON-native"):
        batch.on("complete", Recorder, {"when": object()})


def test_a_late_on_appends_atomically_deduplicated_and_capped(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    batch = Batch()
    batch.on("complete", Recorder, {"a": 1, "b": 2})
    batch.on("complete", Recorder, {"b": 2, "a": 1})  # the same callback
    with batch.jobs():
        batch_jobs.work.perform_async(1)
    assert r.llen(keys.callbacks(batch.bid)) == 1
    batch.on("complete", Recorder, {"a": 1, "b": 2})
    batch.on("success", Recorder)
    assert r.llen(keys.callbacks(batch.bid)) == 2
    assert r.ttl(keys.callbacks(batch.bid)) > 0
    for i in range(998):
        batch.on("death", Recorder, {"i": i})
    with pytest.raises(BatchError, match="has 1000 callbacks already"):
        batch.on("death", Recorder, {"i": "one too many"})
    # Reopened by bid, from anywhere: the same rules.
    with pytest.raises(BatchError, match="1000 callbacks"):
        Batch(bid=batch.bid).on("death", Recorder, {"i": "again"})
    # Added after its event fired: kept, and the warning says it will not run.
    empty = Batch()
    with empty.jobs():
        pass
    with caplog.at_level(logging.WARNING, logger="django_wurk.batches"):
        empty.on("complete", Recorder)
    assert "was added after 'complete' fired; it will not run" in caplog.text
    assert [c.fired for c in BatchStatus(empty.bid).callbacks] == [False]


def test_reopening_a_missing_or_complete_batch_is_refused(wurk: Wurk, r: Any) -> None:
    with pytest.raises(NoSuchBatch), Batch(bid="nosuchbatch").jobs():
        batch_jobs.work.perform_async(1)
    done = Batch()
    with done.jobs():
        pass
    with pytest.raises(BatchClosed), Batch(bid=done.bid).jobs():
        batch_jobs.work.perform_async(1)
    assert r.llen("queue:default") == 0
    with pytest.raises(NoSuchBatch):
        Batch(bid="nosuchbatch").on("complete", Recorder)
    with pytest.raises(ValueError, match="not a batch id"):
        Batch(bid="b-x:y")
    with pytest.raises(ValueError, match="cannot be changed"):
        Batch(bid="abc", description="x")
    for queue in ("a b", "mail\n", "", 'q"'):
        with pytest.raises(ValueError, match="must be a queue name"):
            Batch(callback_queue=queue)


def test_invalidate_all_lets_jobs_skip_their_work(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch()
    batch.on("success", Recorder)
    launcher.stop()
    with batch.jobs():
        for i in range(3):
            batch_jobs.Cancellable.perform_async(i)
    assert batch.valid()
    assert batch.invalidate_all()
    assert not batch.valid() and BatchStatus(batch.bid).invalidated
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: callbacks("success"))  # they skip their work and count as successes
    finally:
        worker.stop()
    assert sorted(runs("cancellable")) == [[0, False], [1, False], [2, False]]
    assert not Batch(bid="expiredorunknown").invalidate_all()
    assert Batch(bid="expiredorunknown").valid()


def test_a_poison_job_buried_by_the_reaper_is_a_death_of_its_batch(wurk: Wurk, r: Any) -> None:
    from django_wurk.core import keys as core_keys
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.reaper import Reaper

    batch = Batch()
    batch.on("death", Recorder)
    with batch.jobs():
        jid = batch_jobs.work.perform_async(1)
    # As a process that died running it for the last allowed time would have left it.
    payload = json.loads(r.rpop("queue:default"))
    payload["recovered"] = wurk.config.max_recoveries
    r.lpush(core_keys.private_queue("gone:1:0123456789ab", "default"), json.dumps(payload))
    assert Reaper(wurk, "reaper:2:0123456789ab", Outage(wurk.config.redis_url)).reap() == 1
    assert json.loads(r.zrange("dead", 0, -1)[0])["error_class"] == "WorkerDied"
    status = BatchStatus(batch.bid)
    assert status.died and status.complete and status.dead_jids == [jid]
    [callback] = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    assert callback["args"][1][0] == "death"


def test_a_batch_django_wurk_did_not_write_is_never_touched(wurk: Wurk, r: Any) -> None:
    """A Sidekiq Pro batch shares the key names (b-<bid>); its jobs run here as plain jobs."""
    from django_wurk.core.features.batches.script import run

    r.hset("b-ProBatch0001", mapping={"total": 2, "pending": 2, "created_at": "1.0"})
    r.sadd("b-ProBatch0001-jids", "a" * 24, "b" * 24)
    before = (r.hgetall("b-ProBatch0001"), r.smembers("b-ProBatch0001-jids"))
    for op in ("failed", "death", "success", "rejoin"):
        assert run(wurk, op, "ProBatch0001", "a" * 24) == -1
    assert not Batch(bid="ProBatch0001").invalidate_all()
    assert (r.hgetall("b-ProBatch0001"), r.smembers("b-ProBatch0001-jids")) == before
    assert r.zcard("dead-batches") == 0 and r.llen("queue:default") == 0
    with pytest.raises(NoSuchBatch), Batch(bid="ProBatch0001").jobs():
        batch_jobs.work.perform_async(1)
    with pytest.raises(NoSuchBatch):
        Batch(bid="ProBatch0001").on("complete", Recorder)


def test_a_write_that_cannot_reach_redis_says_so_clearly(wurk: Wurk, test_config: Any) -> None:
    from django_wurk import EnqueueError

    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0", redis_socket_timeout=0.5))
    batch = Batch(description="unreachable")
    with (
        pytest.raises(EnqueueError, match=rf"could not write batch {batch.bid} \(1 job\) to Redis"),
        batch.jobs(),
    ):
        batch_jobs.work.perform_async(1)
