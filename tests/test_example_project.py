"""The example project stays runnable: its checks pass and its demo jobs run on a real worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django_wurk import Wurk
from tests.conftest import wait_for

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"


def manage(redis_url: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WURK_", "DJANGO_"))}
    env.update(
        WURK_REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'example.sqlite3'}",
        DJANGO_SETTINGS_MODULE="example.settings",
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_example_checks_seeds_and_runs_its_demo_jobs(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path
) -> None:
    check = manage(redis_url, tmp_path, "check", "--fail-level", "WARNING")
    out, err = check.communicate(timeout=60)
    assert check.returncode == 0, out + err

    seed = manage(redis_url, tmp_path, "demo_seed")
    out, err = seed.communicate(timeout=60)
    assert seed.returncode == 0, err
    assert out.count("seeded") == 4
    queued = [json.loads(x)["class"] for x in r.lrange("queue:default", 0, -1)]
    assert sorted(queued) == ["demo.jobs.Slow", "demo.jobs.flaky", "demo.jobs.quick"]
    assert r.zcard("schedule") == 1

    worker = manage(redis_url, tmp_path, "runwurk", "-c", "3", "-q", "default", "-q", "reports")
    try:
        wait_for(lambda: r.llen("queue:default") == 0 and r.zcard("retry") == 1, timeout=30)
        [failed] = [json.loads(m) for m in r.zrange("retry", 0, -1)]
        assert failed["class"] == "demo.jobs.flaky" and "demo failure" in failed["error_message"]
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "demo.jobs.quick" in err  # the job log names each job
