"""``runwurk --autoreload``: TERM to the process you started stops the worker as cleanly as
without autoreload, and a change of code restarts it cleanly.

Before, Django's reloader parent answered TERM by killing its child with SIGKILL: no
"stopped", the running job left in the private list until the reaper came.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from django_wurk import Wurk
from tests import test_runwurk
from tests.conftest import tail, wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import start

stop_later = test_runwurk.stop_later  # the fixture, shared
pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)


def workers_of(r: Any) -> set[str]:
    return {m.decode() for m in r.smembers("processes")}


def test_term_to_the_autoreloading_process_stops_its_worker_cleanly(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    proc = start(redis_url, "--autoreload", "-c", "1", "-t", "10")
    stop_later.append(proc)
    (identity,) = wait_for(lambda: workers_of(r), timeout=30)
    assert int(identity.split(":")[1]) != proc.pid  # the worker runs in the reloader's child
    jobs.sleepy.perform_async(1.0)
    wait_for(lambda: r.llen("seen:sleepy-start") == 1, timeout=15)

    proc.send_signal(signal.SIGTSTP)  # passed on: the worker quiets, its job runs on
    wait_for(lambda: r.hget(identity, "quiet") == b"true", timeout=15)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    # The running job was let finish within the shutdown timeout, as without autoreload.
    assert r.llen("seen:sleepy-done") == 1, stderr
    assert f"stopped {identity}" in stderr
    assert not r.sismember("processes", identity)
    assert not r.keys("queue:sq|*") and not r.llen("queue:default")


def test_a_change_of_code_restarts_the_worker_cleanly(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    watched = Path(jobs.__file__)
    proc = start(redis_url, "--autoreload", "-c", "1")
    stop_later.append(proc)
    (first,) = wait_for(lambda: workers_of(r), timeout=30)
    # The watcher sees a newer modification time: the child stops and a new one starts. Its
    # first look (what later ones compare with) may come after the worker registered, so
    # the time moves on at every poll until the change is seen.
    stat = watched.stat()
    later = [stat.st_mtime]

    def touched_and_replaced() -> bool:
        later[0] += 1
        os.utime(watched, (stat.st_atime, later[0]))
        return first not in workers_of(r)

    try:
        wait_for(touched_and_replaced, timeout=30, interval=0.5)
        (second,) = wait_for(lambda: workers_of(r), timeout=30)
        jobs.echo.perform_async("after the reload")
        wait_for(lambda: r.llen("seen:echo") == 1, timeout=15)
        assert json.loads(r.lindex("seen:echo", 0)) == ["after the reload"]
    finally:
        os.utime(watched, (stat.st_atime, stat.st_mtime))
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert f"stopped {first}" in stderr and f"stopped {second}" in stderr
