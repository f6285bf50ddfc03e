"""Bulk actions on the sorted sets act on the entries present when they start, once each.

A "Retry all" on the dead set while workers run puts every job back on its queue; a job
that fails again is buried with a new score, and a pass that keeps re-reading the set from
its start takes it again, and again (300 entries once gave 736 runs). These tests add
entries while a bulk action runs, deterministically (from client middleware or a death
handler, which run inside the action) and for real (workers failing the retried jobs), and
count what each entry went through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Job, Wurk, job
from django_wurk.api import DeadSet, RetrySet, ScheduledSet
from django_wurk.core import keys, wire
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.sidekiq_data import bounded

RUNS = "bulk-runs"


@job(retry=0)
def fails_into_the_dead_set(n: int) -> None:
    """Counts its runs per argument, then fails with no retries left: straight back to dead."""
    from django_wurk import wurk

    wurk.redis.hincrby(RUNS, str(n), 1)
    raise RuntimeError(f"still broken {n}")


class FailsIntoTheRetrySet(Job):
    """Counts its runs, then fails: back into the retry set, due in an hour (so the poller
    never runs it again during the test)."""

    retry = 25

    def perform(self, n: int) -> None:
        from django_wurk import wurk

        wurk.redis.hincrby(RUNS, str(n), 1)
        raise RuntimeError(f"still broken {n}")

    def retry_in(self, count: int, exc: BaseException) -> int:
        return 3600


def entry(n: int, job_class: str = "EchoJob", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "class": job_class,
        "args": [n],
        "queue": "default",
        "jid": f"{n:024x}",
        "retry": True,
        "created_at": 1767225600.0,
    }
    body.update(extra)
    return body


def fill(r: Any, key: str, count: int, score: Callable[[int], float], **extra: Any) -> None:
    pipe = r.pipeline(transaction=False)
    for n in range(count):
        pipe.zadd(key, {wire.dumps(entry(n, **extra)): score(n)})
    pipe.execute()


class ReAdd:
    """Client middleware: every job pushed gets a fresh twin in ``key`` (once per jid), as a
    worker failing it at once would write; the twin is a new member with a new score.
    Twins get no twins, so even a pass that takes them too comes to an end."""

    def __init__(self, key: str, score: Callable[[int], float]) -> None:
        self.key = key
        self.score = score
        self.seen: set[str] = set()

    def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
        from django_wurk import wurk

        if payload["jid"] not in self.seen and not payload["jid"].startswith("twin"):
            self.seen.add(payload["jid"])
            twin = {**payload, "jid": "twin" + payload["jid"], "failed_at": time.time()}
            wurk.redis.zadd(self.key, {wire.dumps(twin): self.score(payload["args"][0])})
        return call_next()


def pushed(r: Any) -> list[dict[str, Any]]:
    return [wire.loads(raw) for raw in r.lrange(keys.queue("default"), 0, -1)]


# Deterministic: entries added by the action itself ---------------------------------------


def test_dead_retry_all_leaves_entries_buried_meanwhile(wurk: Wurk, r: Any) -> None:
    now = time.time()
    fill(r, keys.DEAD, 250, lambda n: now - 1000 + n)
    # Reburied "now": after every entry present at the start.
    wurk.client_middleware.add(ReAdd, keys.DEAD, lambda n: time.time() + n)
    assert bounded(DeadSet(wurk).retry_all) == 250
    jobs = pushed(r)
    assert sorted(p["args"][0] for p in jobs) == list(range(250))
    assert all(not p["jid"].startswith("twin") for p in jobs)
    assert r.zcard(keys.DEAD) == 250  # only the twins, untouched
    assert all(wire.loads(m)["jid"].startswith("twin") for m in r.zrange(keys.DEAD, 0, -1))


def test_retry_all_leaves_entries_that_land_between_the_old_ones(wurk: Wurk, r: Any) -> None:
    now = time.time()
    fill(r, keys.RETRY, 250, lambda n: now + 1000 + 10 * n)
    # A retry due sooner than the entries not yet retried: it sorts in among them.
    wurk.client_middleware.add(ReAdd, keys.RETRY, lambda n: now + 1000 + 10 * n + 5)
    assert bounded(RetrySet(wurk).retry_all) == 250
    assert sorted(p["args"][0] for p in pushed(r)) == list(range(250))
    assert r.zcard(keys.RETRY) == 250
    assert all(wire.loads(m)["jid"].startswith("twin") for m in r.zrange(keys.RETRY, 0, -1))


def test_add_all_to_queue_leaves_jobs_scheduled_meanwhile(wurk: Wurk, r: Any) -> None:
    now = time.time()
    fill(r, keys.SCHEDULE, 250, lambda n: now + 1000 + n)
    wurk.client_middleware.add(ReAdd, keys.SCHEDULE, lambda n: now + 1000 + n + 0.5)
    assert bounded(ScheduledSet(wurk).add_all_to_queue) == 250
    assert sorted(p["args"][0] for p in pushed(r)) == list(range(250))
    assert r.zcard(keys.SCHEDULE) == 250


def test_kill_all_leaves_retries_added_meanwhile(wurk: Wurk, r: Any) -> None:
    now = time.time()
    fill(r, keys.RETRY, 250, lambda n: now + 1000 + 10 * n)
    added: set[int] = set()

    def fail_again(payload: dict[str, Any], exc: BaseException) -> None:
        n = payload["args"][0]
        if n not in added:
            added.add(n)
            twin = {**payload, "jid": f"twin{n}"}
            wurk.redis.zadd(keys.RETRY, {wire.dumps(twin): now + 1000 + 10 * n + 5})

    wurk.death_handlers.append(fail_again)
    assert bounded(RetrySet(wurk).kill_all) == 250
    assert r.zcard(keys.DEAD) == 250
    assert r.zcard(keys.RETRY) == 250
    assert all(wire.loads(m)["jid"].startswith("twin") for m in r.zrange(keys.RETRY, 0, -1))


def test_bulk_actions_go_oldest_first_and_skip_what_others_removed(wurk: Wurk, r: Any) -> None:
    """The snapshot is a list of what to try, not a promise: entries removed by someone else
    after it was taken are skipped, and the queue receives the rest in score order."""
    fill(r, keys.SCHEDULE, 150, lambda n: 1000.0 + n)
    removed: list[bytes] = []

    class RemoveTheNext:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            n = payload["args"][0]
            if n % 10 == 0:
                nxt = wire.dumps(entry(n + 1))
                if wurk.redis.zrem(keys.SCHEDULE, nxt):
                    removed.append(nxt.encode())
            return call_next()

    wurk.client_middleware.add(RemoveTheNext)
    assert bounded(ScheduledSet(wurk).add_all_to_queue) == 150 - len(removed) == 135
    order = [p["args"][0] for p in reversed(pushed(r))]
    assert order == [n for n in range(150) if n % 10 != 1]
    assert r.zcard(keys.SCHEDULE) == 0


def test_an_entry_that_cannot_be_written_back_is_left_and_the_rest_go_on(wurk: Wurk, r: Any) -> None:
    """A payload the strict encoder refuses (NaN in its args) stays where it is, untouched."""
    r.zadd(keys.DEAD, {b'{"class":"EchoJob","args":[NaN],"jid":"nan","queue":"default"}': 1.0})
    r.zadd(keys.DEAD, {'{"class":"EchoJob","args":["\\ud800"],"jid":"sur","queue":"default"}': 1.5})
    fill(r, keys.DEAD, 3, lambda n: 2.0 + n)
    r.zadd(keys.DEAD, {wire.dumps(entry(7)): float("inf")})
    assert bounded(DeadSet(wurk).retry_all) == 4
    assert sorted(p["args"][0] for p in pushed(r)) == [0, 1, 2, 7]
    assert r.zcard(keys.DEAD) == 2


def test_delete_all_reports_what_it_deleted(wurk: Wurk, r: Any) -> None:
    fill(r, keys.RETRY, 5, float)
    assert RetrySet(wurk).clear_all() == 5
    assert r.exists(keys.RETRY) == 0
    assert RetrySet(wurk).clear_all() == 0


# For real: workers fail the retried jobs while the action runs ----------------------------


def settled(r: Any, count: int, key: str) -> bool:
    """Every job ran and went back into ``key``; nothing queued or running."""
    return (
        r.hlen(RUNS) == count
        and r.zcard(key) == count
        and r.llen(keys.queue("default")) == 0
        and not any(r.hlen(keys.work(i.decode())) for i in r.smembers(keys.PROCESSES))
    )


def runs(r: Any) -> dict[int, int]:
    return {int(k): int(v) for k, v in r.hgetall(RUNS).items()}


@pytest.mark.parametrize("count", [300])
def test_dead_retry_all_with_workers_runs_each_entry_once(
    wurk: Wurk, r: Any, workers: Launcher, count: int
) -> None:
    now = time.time()
    fill(r, keys.DEAD, count, lambda n: now - 1000 + n, job_class=fails_into_the_dead_set.wire_name, retry=0)
    for round_ in (1, 2):
        done = bounded(DeadSet(wurk).retry_all)
        wait_for(lambda: settled(r, count, keys.DEAD), timeout=60)
        assert done == count
        assert runs(r) == dict.fromkeys(range(count), round_)


def test_retry_all_with_workers_runs_each_entry_once(wurk: Wurk, r: Any, workers: Launcher) -> None:
    count = 300
    now = time.time()
    # Due in two hours: a job failing again comes back due in one, in front of them.
    fill(
        r,
        keys.RETRY,
        count,
        lambda n: now + 7200 + n,
        job_class=FailsIntoTheRetrySet.wire_name,
        retry_count=0,
    )
    done = bounded(RetrySet(wurk).retry_all)
    wait_for(lambda: settled(r, count, keys.RETRY), timeout=60)
    assert done == count
    assert runs(r) == dict.fromkeys(range(count), 1)


# Large sets: read and moved a chunk at a time -------------------------------------------


class Sizes:
    """Client middleware: the size of ``key`` each time a job is about to be pushed."""

    def __init__(self, key: str, seen: list[int]) -> None:
        self.key = key
        self.seen = seen

    def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
        from django_wurk import wurk

        self.seen.append(wurk.redis.zcard(self.key))
        return call_next()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    from django_wurk.core import api

    monkeypatch.setattr(api, "CHUNK", 50)
    return 50


@pytest.mark.parametrize("action", ["retry_all", "add_all_to_queue"])
def test_a_bulk_action_moves_every_entry_once_a_chunk_at_a_time(
    wurk: Wurk, r: Any, small_chunks: int, action: str
) -> None:
    count = 7 * small_chunks + 13
    key = keys.RETRY if action == "retry_all" else keys.SCHEDULE
    sset = RetrySet(wurk) if action == "retry_all" else ScheduledSet(wurk)
    fill(r, key, count, lambda n: 1000.0 + n, retry_count=3)
    seen: list[int] = []
    wurk.client_middleware.add(Sizes, key, seen)
    assert bounded(getattr(sset, action)) == count
    # Each chunk's jobs pass the middleware before any of them moves, and move together.
    assert seen == [count - small_chunks * (i // small_chunks) for i in range(count)]
    jobs = pushed(r)
    assert sorted(p["args"][0] for p in jobs) == list(range(count))
    assert [p["args"][0] for p in reversed(jobs)] == list(range(count))  # oldest first
    assert {p["retry_count"] for p in jobs} == ({2} if action == "retry_all" else {3})
    assert r.zcard(key) == 0


def test_kill_all_moves_every_entry_once_a_chunk_at_a_time(wurk: Wurk, r: Any, small_chunks: int) -> None:
    count = 5 * small_chunks + 1
    fill(r, keys.RETRY, count, lambda n: 1000.0 + n)
    told: list[int] = []
    wurk.death_handlers.append(lambda payload, exc: told.append(payload["args"][0]))
    assert bounded(RetrySet(wurk).kill_all) == count
    assert told == list(range(count))
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == count


def test_more_entries_at_one_score_than_a_chunk_holds(wurk: Wurk, r: Any, small_chunks: int) -> None:
    """Any number of entries can share a score; they are read in chunks too, each once, and
    twins added at that very score meanwhile are left."""
    crowd = 3 * small_chunks + 7
    fill(r, keys.RETRY, crowd + 20, lambda n: 5.0 if n < crowd else float(n))
    wurk.client_middleware.add(ReAdd, keys.RETRY, lambda n: 5.0)
    assert bounded(RetrySet(wurk).retry_all) == crowd + 20
    assert sorted(p["args"][0] for p in pushed(r)) == list(range(crowd + 20))
    assert r.zcard(keys.RETRY) == crowd + 20  # only the twins
    assert all(wire.loads(m)["jid"].startswith("twin") for m in r.zrange(keys.RETRY, 0, -1))


def test_retry_all_after_the_server_forgot_its_scripts(wurk: Wurk, r: Any, small_chunks: int) -> None:
    fill(r, keys.DEAD, 120, lambda n: 1000.0 + n)
    r.script_flush()
    assert bounded(DeadSet(wurk).retry_all) == 120
    assert len(pushed(r)) == 120 and r.zcard(keys.DEAD) == 0


def test_a_queue_key_of_another_type_stops_retry_all_and_loses_nothing(
    wurk: Wurk, r: Any, small_chunks: int
) -> None:
    """Redis refuses to push onto a queue key that is not a list; the action says so, that
    entry stays, and every other entry is either still in the set or on its queue, once."""
    fill(r, keys.RETRY, 120, lambda n: 1000.0 + n)
    r.zadd(keys.RETRY, {wire.dumps(entry(999, queue="broken")): 1060.5})
    r.set(keys.queue("broken"), "not a list")
    with pytest.raises(Exception, match="WRONGTYPE"):
        RetrySet(wurk).retry_all()
    left = [wire.loads(m)["args"][0] for m in r.zrange(keys.RETRY, 0, -1)]
    assert 999 in left
    assert sorted(left + [p["args"][0] for p in pushed(r)]) == [*range(120), 999]
    r.delete(keys.queue("broken"))
    assert bounded(RetrySet(wurk).retry_all) == len(left)
    assert sorted(p["args"][0] for p in pushed(r)) == list(range(120))
    assert r.llen(keys.queue("broken")) == 1 and r.zcard(keys.RETRY) == 0
