"""runwurk -P N: a supervisor that forks workers, replaces and recycles them, and forwards signals."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.jobsapp import jobs


def children(r: Any, parent: int) -> dict[int, str]:
    """pid -> identity of the worker processes the supervisor ``parent`` forked."""
    found = {}
    for member in r.smembers("processes"):
        identity = member.decode()
        pid = int(identity.split(":")[1])
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                ppid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
        except OSError:
            continue
        if ppid == parent:
            found[pid] = identity
    return found


def test_swarm_runs_replaces_rolls_and_stops(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any], tmp_path: Any
) -> None:
    supervisor = spawn_worker("-P", "2", "-c", "2")
    first = wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and c, timeout=30)
    assert supervisor.pid not in first  # the supervisor runs no jobs and does not heartbeat

    for i in range(20):
        jobs.echo.perform_async(i)
    wait_for(lambda: r.llen("seen:echo") == 20, timeout=30)

    # A worker that dies is replaced.
    victim = next(iter(first))
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and victim not in c, timeout=30)

    # TSTP is forwarded: every worker goes quiet.
    current = children(r, supervisor.pid)
    supervisor.send_signal(signal.SIGTSTP)
    wait_for(lambda: all(r.hget(i, "quiet") == b"true" for i in current.values()), timeout=30)

    # TTIN is forwarded: each worker dumps its threads to the (shared) log.
    log = tmp_path / "worker-0.log"
    supervisor.send_signal(signal.SIGTTIN)
    wait_for(lambda: log.read_text().count("thread dump done") == 2, timeout=30)

    # USR1: a rolling restart replaces both workers.
    supervisor.send_signal(signal.SIGUSR1)
    wait_for(
        lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and not set(c) & set(current), timeout=60
    )

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0
    assert children(r, supervisor.pid) == {}


def test_a_worker_past_its_memory_ceiling_is_recycled(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any], tmp_path: Any
) -> None:
    supervisor = spawn_worker("-P", "1", "--max-memory-mb", "1")  # any Python process is bigger
    seen: set[int] = set()

    def recycled_twice() -> bool:
        seen.update(children(r, supervisor.pid))
        return len(seen) >= 2

    wait_for(recycled_twice, timeout=60)
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0


def test_jobs_survive_a_child_killed_mid_job(wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]) -> None:
    supervisor = spawn_worker("-P", "2", "-c", "3")
    wait_for(lambda: len(children(r, supervisor.pid)) == 2, timeout=30)
    jobs.tracked.perform_bulk([(i, 0.2) for i in range(30)])
    wait_for(lambda: r.llen("seen:tracked") >= 6, timeout=30)
    for pid in children(r, supervisor.pid):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: {json.loads(x) for x in r.lrange("seen:tracked", 0, -1)} == set(range(30)), timeout=90)
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0
