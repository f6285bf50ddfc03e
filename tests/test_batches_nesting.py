"""Child batches, the death cascade, cancelling a tree, TTLs on every key, and index trims."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Config, Wurk
from django_wurk.core.features.batches import BatchClosed, BatchSettings, NoSuchBatch, keys
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder, runs


@pytest.fixture
def launcher(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def settled(r: Any, worker: Launcher) -> None:
    """Wait until nothing is queued, due for a retry, fetched or running: nothing more can fire."""

    def idle() -> bool:
        fetched = any(r.llen(key) for key in r.scan_iter(match="queue:sq|*"))
        return not fetched and r.llen("queue:default") == 0 and r.zcard("retry") == 0

    wait_for(lambda: idle() and not worker.manager.work.snapshot() and idle())


def make_due(r: Any, key: str = "retry") -> None:
    for member, _ in r.zrange(key, 0, -1, withscores=True):
        r.zadd(key, {member: time.time() - 1}, xx=True)


def callbacks(event: str | None = None) -> list[dict[str, Any]]:
    return [c for c in runs("callbacks") if event is None or c["event"] == event]


def all_batch_keys(r: Any) -> dict[str, int]:
    """Every batch key and its TTL (the indexes aside)."""
    return {k.decode(): r.ttl(k) for k in r.scan_iter(match="b-*")}


def assert_every_batch_key_expires(r: Any, at_most: int | None = None) -> None:
    ttls = all_batch_keys(r)
    assert ttls, "no batch keys at all"
    for key, ttl in ttls.items():
        assert ttl > 0, f"{key} has no TTL ({ttl})"
        if at_most is not None:
            assert ttl <= at_most, f"{key} lives {ttl} s, more than {at_most}"


def test_three_levels_deep_each_parent_waits_for_its_children(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    top = Batch(description="top")
    top.on("complete", Recorder, {"level": 3})
    top.on("success", Recorder, {"level": 3})
    with top.jobs():
        batch_jobs.work.perform_async(300)
        batch_jobs.spawns_child.perform_async(2, 3)  # a child, which opens a grandchild
    wait_for(lambda: callbacks("success") and callbacks("success")[-1]["options"] == {"level": 3}, timeout=20)
    settled(r, launcher)
    fired = callbacks()
    assert Counter((c["event"], c["options"]["level"]) for c in fired) == {
        (event, level): 1 for event in ("complete", "success") for level in (1, 2, 3)
    }
    # Children's callbacks ran before their parent's: each parent waited for them.
    order = [(c["event"], c["options"]["level"]) for c in fired]
    for event in ("complete", "success"):
        assert order.index((event, 1)) < order.index((event, 2)) < order.index((event, 3))
    levels = {c["options"]["level"]: c["bid"] for c in fired}
    assert levels[3] == top.bid
    child, grandchild = BatchStatus(levels[2]), BatchStatus(levels[1])
    assert child.parent_bid == top.bid and grandchild.parent_bid == child.bid
    assert BatchStatus(top.bid).child_count == 1 and child.child_count == 1 and grandchild.child_count == 0
    assert BatchStatus(top.bid).child_bids == [child.bid]
    # The child callback jobs ran as jobs of the parent (Batch.current() in them is the parent).
    assert {c["running_bid"] for c in fired if c["options"]["level"] == 2} == {top.bid}
    assert {c["running_bid"] for c in fired if c["options"]["level"] == 3} == {None}
    assert sorted(n for n, _ in runs("work")) == [100, 101, 102, 200, 201, 202, 300]
    assert_every_batch_key_expires(r, at_most=wurk.config.section(BatchSettings).batch_linger)


def test_a_child_made_in_the_parents_block_is_written_with_it(wurk: Wurk, r: Any) -> None:
    parent = Batch()
    with parent.jobs():
        batch_jobs.work.perform_async(1)
        child = Batch()
        with child.jobs():
            batch_jobs.work.perform_async(2)
        assert r.dbsize() == 0  # one write, when the outermost block ends
    assert child.parent_bid == parent.bid
    assert BatchStatus(parent.bid).child_bids == [child.bid]
    assert BatchStatus(child.bid).total == 1 and BatchStatus(parent.bid).total == 1
    queued = {json.loads(x)["args"][0]: json.loads(x)["bid"] for x in r.lrange("queue:default", 0, -1)}
    assert queued == {1: parent.bid, 2: child.bid}
    # A top-level batch is asked for explicitly.
    with parent.jobs():
        unrelated = Batch(parent=None)
    assert unrelated.parent_bid is None


def test_an_explicit_parent_must_exist_and_be_open(wurk: Wurk, r: Any) -> None:
    parent = Batch()
    with parent.jobs():
        batch_jobs.work.perform_async(1)
    child = Batch(parent=parent.bid)
    with child.jobs():
        batch_jobs.work.perform_async(2)
    assert BatchStatus(child.bid).parent_bid == parent.bid
    with pytest.raises(NoSuchBatch, match="parent batch"), Batch(parent="neverwritten").jobs():
        batch_jobs.work.perform_async(3)
    closed = Batch()
    with closed.jobs():
        pass
    with pytest.raises(BatchClosed, match="parent batch"), Batch(parent=closed).jobs():
        batch_jobs.work.perform_async(4)
    assert r.llen("queue:default") == 2


def test_a_death_cascades_to_every_ancestor_once_and_blocks_their_success(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    top = Batch()
    bystander = Batch(parent=None)  # written in top's block, but not its child
    for batch, level in ((top, 3), (bystander, 0)):
        for event in ("complete", "success", "death"):
            batch.on(event, Recorder, {"level": level})
    grandchild_jids: list[str | None] = []
    # The child joins inside top's block: after it, top's one job may already have run, and
    # a complete batch takes no child (BatchClosed), which made this test race the worker.
    with top.jobs():
        batch_jobs.work.perform_async(1)
        with bystander.jobs():
            pass
        child = Batch(parent=top)
        for event in ("complete", "success", "death"):
            child.on(event, Recorder, {"level": 2})
        with child.jobs():
            grandchild = Batch()
            for event in ("complete", "success", "death"):
                grandchild.on(event, Recorder, {"level": 1})
            with grandchild.jobs():
                grandchild_jids.append(batch_jobs.dies.perform_async(1))
                batch_jobs.dies.perform_async(2)  # a second death fires nothing more
                batch_jobs.work.perform_async(3)
    wait_for(
        lambda: {(c["event"], c["options"]["level"]) for c in callbacks()} >= {("complete", 3)}, timeout=20
    )
    settled(r, launcher)
    fired = Counter((c["event"], c["options"]["level"]) for c in callbacks() if c["bid"] != bystander.bid)
    assert fired == {
        ("death", 1): 1,
        ("death", 2): 1,
        ("death", 3): 1,
        ("complete", 1): 1,
        ("complete", 2): 1,
        ("complete", 3): 1,
    }
    assert all(BatchStatus(b.bid).died for b in (top, child, grandchild))
    assert not any(BatchStatus(b.bid).succeeded for b in (top, child, grandchild))
    # Only the batch that holds the dead jobs is a dead batch.
    assert [b.decode() for b in r.zrange("dead-batches", 0, -1)] == [grandchild.bid]
    assert set(BatchStatus(grandchild.bid).dead_jids) >= {grandchild_jids[0]}
    # The unrelated batch was not touched by the death.
    assert {c["event"] for c in callbacks() if c["bid"] == bystander.bid} == {"complete", "success"}
    assert_every_batch_key_expires(r)


def test_invalidating_a_parent_invalidates_its_children(wurk: Wurk, r: Any) -> None:
    parent = Batch()
    with parent.jobs():
        child = Batch()
        with child.jobs():
            batch_jobs.work.perform_async(1)
        batch_jobs.work.perform_async(2)
    assert child.valid() and parent.valid()
    assert parent.invalidate_all()
    assert not parent.valid() and not child.valid()
    assert not BatchStatus(child.bid).invalidated  # only the parent was marked


def test_every_key_gets_a_ttl_where_it_is_created(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    batch = Batch(expires_in=5000, linger=600)
    batch.on("complete", Recorder)
    with batch.jobs():
        batch_jobs.flaky.perform_async(7)
        batch_jobs.dies.perform_async(8)
        child = Batch()
        with child.jobs():
            batch_jobs.work.set(queue="nobody-listens").perform_async(9)  # stays pending
    wait_for(lambda: r.exists(keys.failed(batch.bid)) and r.exists(keys.died(batch.bid)))
    for key in (keys.kids(batch.bid), keys.pending_kids(batch.bid), keys.unsucceeded_kids(batch.bid)):
        assert r.exists(key)
    assert r.exists(keys.callbacks(batch.bid)) and r.exists(keys.jids(child.bid))
    assert_every_batch_key_expires(r, at_most=wurk.config.section(BatchSettings).batch_expires_in)
    assert 4900 < r.ttl(keys.batch(batch.bid)) <= 5000
    assert 4900 < r.ttl(keys.failed(batch.bid)) <= 5000  # the hash's remaining lifetime
    assert r.ttl(keys.batch(child.bid)) > 5000  # the child has the default (30 days)
    assert_every_batch_key_expires(r)


def test_after_success_the_keys_linger_and_a_shorter_ttl_is_never_lengthened(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    batch = Batch(linger=120)
    batch.on("success", Recorder)
    with batch.jobs():
        batch_jobs.flaky.perform_async(1)
    wait_for(lambda: r.zcard("retry") == 1)
    r.expire(keys.callbacks(batch.bid), 30)  # shorter than the linger
    make_due(r)
    wait_for(lambda: callbacks("success"))
    ttls = all_batch_keys(r)
    assert 110 < ttls[keys.batch(batch.bid)] <= 120 and 0 < ttls[keys.callbacks(batch.bid)] <= 30
    assert all(0 < ttl <= 120 for ttl in ttls.values())
    # Opening another batch's keys later never lengthens a TTL either.
    other = Batch()
    with other.jobs():
        batch_jobs.work.set(queue="nobody-listens").perform_async(1)
    r.expire(keys.jids(other.bid), 40)
    with Batch(bid=other.bid).jobs():
        batch_jobs.work.set(queue="nobody-listens").perform_async(2)
    assert 0 < r.ttl(keys.jids(other.bid)) <= 40


def test_defaults_are_thirty_days_and_a_day(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with batch.jobs():
        batch_jobs.work.set(queue="nobody-listens").perform_async(1)
    assert 30 * 86400 - 10 < r.ttl(keys.batch(batch.bid)) <= 30 * 86400
    status = BatchStatus(batch.bid)
    assert status.linger == 86400 and status.expires_in and status.expires_in > 29 * 86400
    with pytest.raises(ValueError, match="expires_in must be seconds"):
        Batch(expires_in=0)
    with pytest.raises(ValueError, match="linger must be seconds"):
        Batch(linger=-1)


def test_the_indexes_are_trimmed_by_count_and_age_on_every_add(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.with_section(BatchSettings(batch_index_max=3)))
    old = time.time() - wurk.config.section(BatchSettings).batch_expires_in - 60
    r.zadd("batches", {"ancient": old})
    r.zadd("dead-batches", {"ancient": old})
    bids = []
    for _ in range(5):
        batch = Batch()
        with batch.jobs():
            batch_jobs.work.set(queue="nobody-listens").perform_async(1)
        bids.append(batch.bid)
    assert [b.decode() for b in r.zrange("batches", 0, -1)] == bids[-3:]
    # dead-batches: trimmed when a death adds to it.
    assert r.zscore("dead-batches", "ancient") is not None
    r.zadd("dead-batches", {f"filler{i}": time.time() - i for i in range(5)})
    from django_wurk.core.features.batches.script import run

    run(wurk, "death", bids[-1], json.loads(r.lindex("queue:nobody-listens", 0))["jid"])
    dead = [b.decode() for b in r.zrange("dead-batches", 0, -1)]
    assert len(dead) == 3 and dead[-1] == bids[-1] and "ancient" not in dead
