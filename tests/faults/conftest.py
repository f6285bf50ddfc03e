"""Helpers for fault tests: real worker processes we can kill, restart and count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Fast failure detection: a process is dead 1.5 s after its last beat; reaper every 0.3 s.
FAST = {
    "WURK_HEARTBEAT_INTERVAL": "0.2",
    "WURK_POLL_INTERVAL": "0.2",
    "WURK_FETCH_TIMEOUT": "0.2",
    "WURK_PROCESS_DEAD_AFTER": "1.5",
    "WURK_REAPER_INTERVAL": "0.3",
}


@pytest.fixture
def spawn_worker(redis_url: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``manage.py runwurk`` processes; any still running are killed at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def spawn(*args: str, **env: str) -> subprocess.Popen[str]:
        full = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
        full.update(DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(ROOT), WURK_REDIS_URL=redis_url)
        full.update(FAST)
        full.update(env)
        log = (tmp_path / f"worker-{len(procs)}.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runwurk", *args],
            cwd=ROOT,
            env=full,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)
