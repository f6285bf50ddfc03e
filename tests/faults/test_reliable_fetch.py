"""Reliable fetch: no job is lost when a worker dies, and none runs twice after a clean stop."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Callable
from typing import Any

from django_wurk import Config, Wurk
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs


def seen_counts(r: Any) -> Counter[int]:
    return Counter(json.loads(x) for x in r.lrange("seen:tracked", 0, -1))


def private_lists(r: Any) -> list[bytes]:
    return list(r.scan_iter(match="queue:sq|*"))


def test_a_running_job_sits_in_the_private_list_until_it_finishes(wurk: Wurk, r: Any) -> None:
    worker = Launcher(wurk)
    worker.start()
    try:
        jid = jobs.blocks_until_released.perform_async("x")
        private = f"queue:sq|{worker.identity}|default"
        wait_for(lambda: r.llen(private) == 1)
        assert json.loads(r.lindex(private, 0))["jid"] == jid and r.llen("queue:default") == 0
        jobs.release.set()
        # Acknowledged: the job left the private list, with nothing else needed.
        wait_for(lambda: r.llen(private) == 0)
        jobs.always_fails.set(retry=1).perform_async(1)
        wait_for(lambda: r.zcard("retry") == 1 and r.llen(private) == 0)  # a recorded retry is finished too
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()
    assert private_lists(r) == []


def test_kill_minus_nine_loses_nothing(wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]) -> None:
    jids = [jobs.tracked.perform_async(i, 0.3) for i in range(40)]
    victim = spawn_worker("-c", "5")
    wait_for(lambda: len(seen_counts(r)) >= 5, timeout=30)  # mid-run: some done, five in flight
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    in_flight = sum(r.llen(k) for k in private_lists(r))
    assert in_flight > 0  # the killed worker's jobs are still in Redis, not lost
    rescuer = spawn_worker("-c", "5")
    wait_for(lambda: set(seen_counts(r)) == set(range(40)), timeout=60)
    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(30) == 0
    assert private_lists(r) == []
    # At least once: the jobs killed mid-run ran again; nothing else ran twice.
    counts = seen_counts(r)
    assert sum(counts.values()) - 40 <= in_flight
    assert len(jids) == 40


def test_a_job_that_keeps_killing_its_worker_ends_in_the_dead_set(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    jid = jobs.kills_its_worker.perform_async()
    jobs.tracked.perform_async(1)
    deaths = 0
    while r.zcard("dead") == 0:
        worker = spawn_worker("-c", "1", WURK_MAX_RECOVERIES="2")
        try:
            wait_for(lambda w=worker: w.poll() is not None or r.zcard("dead") == 1, timeout=30)
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(30)
            else:
                deaths += 1
        assert deaths <= 3, "the poison job kept killing workers"
    assert deaths == 3  # ran three times (recovered twice), buried on the third recovery
    [(member, _)] = r.zrange("dead", 0, -1, withscores=True)
    dead = json.loads(member)
    assert dead["jid"] == jid and dead["error_class"] == "WorkerDied" and dead["recovered"] == 3
    assert "died 3 times" in dead["error_message"]
    assert r.llen("seen:kills_its_worker") == 3
    wait_for(lambda: seen_counts(r) == Counter({1: 1}), timeout=30)  # the innocent job still ran


def test_term_under_load_finishes_or_returns_every_job_exactly_once(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    jobs.tracked.perform_bulk([(i, 0.02) for i in range(300)])
    first = spawn_worker("-c", "5", "-t", "0.2")
    wait_for(lambda: len(seen_counts(r)) >= 50, timeout=30)
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0
    assert private_lists(r) == []
    done = seen_counts(r)
    waiting = [json.loads(x)["args"][0] for x in r.lrange("queue:default", 0, -1)]
    assert set(done).isdisjoint(waiting) and set(done) | set(waiting) == set(range(300))
    second = spawn_worker("-c", "5")
    wait_for(lambda: len(seen_counts(r)) == 300, timeout=60)
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert seen_counts(r) == Counter(range(300))  # every job exactly once


def test_basic_fetch_is_still_available(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(fetch="basic"))
    worker = Launcher(wurk)
    worker.start()
    try:
        jobs.blocks_until_released.perform_async("b")
        wait_for(lambda: wurk.redis.llen("seen:blocked") == 1)
        assert private_lists(wurk.redis) == []  # BRPOP keeps nothing in Redis while running
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()


def test_an_idle_worker_blocks_on_every_queue_instead_of_polling(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    from django_wurk.core.config import QueueSpec

    queues = (QueueSpec("a"), QueueSpec("b"), QueueSpec("c"))
    wurk.configure(test_config.replace(queues=queues, concurrency=3, fetch_timeout=1.0))
    worker = Launcher(wurk)
    worker.start()
    try:

        def blocked() -> list[str]:
            return sorted(c["cmd"] for c in wurk.redis.client_list() if "b" in c.get("flags", ""))

        # Three threads, three queues: each thread waits inside Redis on its own queue.
        wait_for(lambda: blocked() == ["blmove"] * 3)
        for name in ("c", "b", "a"):
            jobs.echo.set(queue=name).perform_async(name)
        wait_for(
            lambda: sorted(json.loads(x)[0] for x in wurk.redis.lrange("seen:echo", 0, -1)) == ["a", "b", "c"]
        )
    finally:
        worker.stop()
