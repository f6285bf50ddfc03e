"""Dashboard liveness: a job shows as running, and its count as processed, within a second.

The worker here beats every 30 s, so anything seen sooner came from a pulse (a write the
heartbeat makes soon after the busy set changes), not from a beat.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis as redis_lib

from django_wurk import Config, Wurk
from django_wurk.core import api
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs

#: Beats this far apart never explain what a test sees within a second.
SLOW_BEAT = 30.0

#: The commands a heartbeat writes with (beat or pulse).
HEARTBEAT_WRITES = ("hset", "unlink", "incrby", "sadd", "expire", "multi", "exec", "rpop", "ping")


@pytest.fixture
def slow_beat(wurk: Wurk, test_config: Config) -> Iterator[Launcher]:
    wurk.configure(test_config.replace(heartbeat_interval=SLOW_BEAT, concurrency=3))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


def within(seconds: float, since: float, predicate: Any) -> None:
    """``predicate()`` turns true less than ``seconds`` after ``since`` (a monotonic time)."""
    while not predicate():
        if time.monotonic() - since > seconds:
            raise AssertionError(f"not within {seconds} s: {predicate}")
        time.sleep(0.01)


def running(wurk: Wurk) -> list[str]:
    return [j.record.jid for j in api.Workers(wurk)]


def busy_counts(wurk: Wurk) -> list[int]:
    return [p.busy for p in api.ProcessSet(wurk)]


def test_a_running_job_is_listed_within_a_second_of_starting(slow_beat: Launcher, wurk: Wurk, r: Any) -> None:
    jid = jobs.blocks_until_released.perform_async("live")
    wait_for(lambda: seen(r, "blocked") == ["live"], interval=0.005)
    started = time.monotonic()  # the job has told us it runs: at most 5 ms ago
    within(1.0, started, lambda: running(wurk) == [jid])
    within(1.0, started, lambda: busy_counts(wurk) == [1])
    assert api.Workers(wurk).size() == 1

    jobs.release.set()
    ended = time.monotonic()
    within(1.0, ended, lambda: running(wurk) == [] and busy_counts(wurk) == [0])
    within(1.0, ended, lambda: api.Stats(wurk).processed == 1)


def test_processed_and_failed_totals_follow_within_a_second(slow_beat: Launcher, wurk: Wurk, r: Any) -> None:
    for round_ in range(1, 4):
        jobs.echo.perform_async(round_)
        jobs.dies_at_once.perform_async(round_)
        wait_for(lambda n=round_: len(seen(r, "echo")) == n, interval=0.005)
        done = time.monotonic()
        within(1.0, done, lambda n=round_: (api.Stats(wurk).processed, api.Stats(wurk).failed) == (2 * n, n))


@contextmanager
def counted(r: Any, redis_url: str) -> Iterator[dict[str, int]]:
    """Counts of the calls of each of ``HEARTBEAT_WRITES`` on ``r``'s database while inside.

    Counted from MONITOR, not INFO commandstats: the counts there are the whole server's,
    and on a shared server (CI's pass 2: the other pytest-xdist workers use the databases
    below) the other tests' commands would count as this worker's. MONITOR names each
    command's database (a Lua script's commands too); two ECHOes sent through ``r`` mark
    where the stretch starts and ends, and which database is ours. The counts are filled
    in on leaving.
    """
    marker = f"wurk-counted-{uuid.uuid4().hex}"
    counts = dict.fromkeys(HEARTBEAT_WRITES, 0)
    with redis_lib.Redis.from_url(redis_url, socket_timeout=30) as watcher, watcher.monitor() as monitor:
        r.echo(f"{marker}-start")
        yield counts
        r.echo(f"{marker}-end")
        db = None
        while True:
            command = monitor.next_command()
            name, *args = command["command"].split(" ")
            name = name.lower()
            if name == "echo" and args == [f"{marker}-start"]:
                db = command["db"]
            elif db is None or command["db"] != db:
                continue
            elif name == "echo" and args == [f"{marker}-end"]:
                return
            elif name in counts:
                counts[name] += 1


def test_an_idle_worker_writes_nothing_between_beats(
    slow_beat: Launcher, wurk: Wurk, r: Any, redis_url: str
) -> None:
    jobs.echo.perform_async("warm up")
    wait_for(lambda: seen(r, "echo"))
    wait_for(lambda: api.Stats(wurk).processed == 1 and busy_counts(wurk) == [0])
    time.sleep(0.6)  # let the pulse after the job's end go out; what follows is idle
    with counted(r, redis_url) as counts:
        time.sleep(2.0)  # measuring a quiet stretch: nothing to poll for
    assert counts == dict.fromkeys(HEARTBEAT_WRITES, 0)


def test_a_busy_worker_pulses_at_most_twice_a_second(
    slow_beat: Launcher, wurk: Wurk, r: Any, redis_url: str
) -> None:
    """However many jobs start and end, the busy-work hash is rewritten twice a second at most.

    Each beat or pulse UNLINKs the busy-work hash once (and nothing else in a worker does);
    the jobs here start and end about 60 times a second for over a second.
    """
    with counted(r, redis_url) as counts:
        started = time.monotonic()
        for _ in range(60):
            jobs.sleepy.perform_async(0.05)
        wait_for(lambda: len(seen(r, "sleepy-done")) == 60)
        elapsed = time.monotonic() - started
        wait_for(lambda: api.Stats(wurk).processed == 60)
    writes = counts["unlink"]
    assert elapsed > 0.9
    assert 1 <= writes <= 2 * elapsed + 2  # and one more for the last change
