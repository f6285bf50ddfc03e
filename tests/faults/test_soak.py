"""The soak: 200,000 jobs through two worker processes, with failures and two kill -9s.

At the end every pushed jid is accounted for — done, waiting in the retry set, or dead —
and the surviving worker's memory did not grow. It runs once in CI (marker ``soak``);
``WURK_SOAK_JOBS`` changes its size.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.faults.test_swarm import children
from tests.jobsapp import jobs

JOBS = int(os.environ.get("WURK_SOAK_JOBS", "200000"))


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


@pytest.mark.soak
def test_soak_accounts_for_every_job(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    pushed: list[str] = []
    for start in range(0, JOBS, 10_000):
        pushed += [
            j for j in jobs.SoakJob.perform_bulk([(i,) for i in range(start, min(start + 10_000, JOBS))]) if j
        ]
    assert len(pushed) == JOBS
    supervisor = spawn_worker("-P", "2", "-c", "10", "-v", "0")
    memory: dict[int, list[float]] = {}
    kills: list[int] = []

    def progress() -> bool:
        done = r.scard("soak:done")
        for pid in children(r, supervisor.pid):
            memory.setdefault(pid, []).append(rss_mb(pid))
        if len(kills) < 2 and done >= JOBS * (len(kills) + 1) / 3:
            victim = next(iter(children(r, supervisor.pid)), None)
            if victim:
                os.kill(victim, signal.SIGKILL)
                kills.append(victim)
        private = sum(r.llen(k) for k in r.scan_iter(match="queue:sq|*"))
        return len(kills) == 2 and r.llen("queue:default") == 0 and private == 0 and done > 0

    wait_for(progress, timeout=600, interval=0.5)
    # Let the last acknowledgements and retry writes land, then stop cleanly.
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0
    done = {m.decode() for m in r.smembers("soak:done")}
    # Retrying: in the retry set, or promoted from it and pushed back to the queue by the stop.
    retrying = {json.loads(m)["jid"] for m in r.zrange("retry", 0, -1)}
    retrying |= {json.loads(m)["jid"] for m in r.lrange("queue:default", 0, -1)}
    dead = {json.loads(m)["jid"] for m in r.zrange("dead", 0, -1)}
    assert set(pushed) == done | retrying | dead, "a job was lost"
    assert not (done & dead)
    # Memory: the longest-lived worker process, from warm-up (a quarter in) to its end.
    series = max(memory.values(), key=len)
    warm = series[len(series) // 4]
    growth = max(series[len(series) // 4 :]) - warm
    assert growth < 20, f"memory grew {growth:.1f} MB after warm-up: {series}"
    with capsys.disabled():
        print(
            f"\nsoak: {JOBS:,} pushed, {len(done):,} done, {len(retrying):,} retrying, {len(dead):,} dead, "
            f"0 lost; 2 workers killed; surviving worker RSS {warm:.0f} -> {series[-1]:.0f} MB; "
            f"{time.monotonic() - started:.0f} s"
        )
