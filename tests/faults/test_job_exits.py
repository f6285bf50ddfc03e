"""A job that leaves with a ``BaseException`` (``sys.exit()``, ``KeyboardInterrupt``, a
library's own) fails under its retry rules, and its worker goes on taking jobs.

Before, such a job ended its processor thread for good: no retry or dead entry, no
``stat:failed``, the heartbeat going on so the job was never recovered, and a worker of
``-c 1`` (or every child of ``-P 2 -c 1``) taking no job again.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.jobsapp import jobs

Spawn = Callable[..., subprocess.Popen[str]]


def entries(r: Any, key: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in r.zrange(key, 0, -1)]


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


@pytest.mark.parametrize("how", sorted(jobs.EXITS))
def test_a_job_that_exits_fails_by_its_retry_rules_and_the_worker_goes_on(
    wurk: Wurk, r: Any, spawn_worker: Spawn, how: str
) -> None:
    worker = spawn_worker("-c", "1")
    jobs.leaves_by.perform_async(how)
    for n in range(20):
        jobs.echo.perform_async(n)
    wait_for(lambda: r.llen("seen:echo") == 20, timeout=30)

    (retry,) = entries(r, "retry")
    assert retry["class"] == "tests.jobsapp.jobs.leaves_by"
    assert retry["error_class"] == "JobExit"
    expected = {"exit": "SystemExit: 2", "keyboard": "KeyboardInterrupt", "generator": "GeneratorExit"}
    assert retry["error_message"] == expected.get(how, "OwnBaseException: from a library")
    assert retry["retry_count"] == 0
    # The counters reach Redis with the heartbeat, after the jobs' own records.
    wait_for(lambda: r.get("stat:failed") == b"1" and r.get("stat:processed") == b"21", timeout=10)
    # Acknowledged: nothing is left in the private list for a recovery to run again.
    assert not r.keys("queue:sq|*") or all(not r.llen(k) for k in r.keys("queue:sq|*"))
    # TERM stops it cleanly, with nothing pushed back (the job is not "running" any more).
    assert stop(worker) == 0
    assert r.llen("queue:default") == 0
    assert r.llen("seen:leaves_by") == 1


def test_jobs_that_exit_in_every_child_of_a_swarm_wedge_none(wurk: Wurk, r: Any, spawn_worker: Spawn) -> None:
    """``-P 2 -c 1``: one such job per child used to leave the whole swarm taking no job."""
    supervisor = spawn_worker("-P", "2", "-c", "1")
    for how in ("exit", "keyboard", "own", "exit"):
        jobs.leaves_for_good.perform_async(how)
    for n in range(20):
        jobs.echo.perform_async(n)
    wait_for(lambda: r.llen("seen:echo") == 20, timeout=60)
    dead = entries(r, "dead")
    assert len(dead) == 4
    assert {d["error_class"] for d in dead} == {"JobExit"}
    assert sorted(d["error_message"] for d in dead) == [
        "KeyboardInterrupt",
        "OwnBaseException: from a library",
        "SystemExit: 2",
        "SystemExit: 2",
    ]
    wait_for(lambda: r.get("stat:failed") == b"4", timeout=10)
    assert stop(supervisor) == 0
