"""Job status (``track=True``): state by jid through a job's life, progress, result, retention.

Real workers run the jobs (the ``workers`` fixture); the status is read back through the
data API (``JobStatus.get``) and from the hash itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_wurk import Job, Wurk, current_status, job, wurk
from django_wurk.api import JobStatus
from django_wurk.core.features.status import StatusSettings
from django_wurk.core.features.status.reporter import FLUSH_EVERY
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for


@job(track=True)
def add(a: int, b: int) -> int:
    return a + b


@job(track=True)
def reports(steps: int) -> dict[str, int]:
    status = current_status()
    for i in range(steps):
        status.set(progress=100 * (i + 1) / steps, message=f"step {i + 1} of {steps}")
    return {"steps": steps}


@job(track=True)
def waits(key: str) -> None:
    current_status().set(progress=10, message="waiting")
    wait_for(lambda: wurk.redis.exists(key), timeout=10)


@job(track=True, retry=1)
def always_fails() -> None:
    raise RuntimeError("boom " + "x" * 5000)


@job(track=True, retry=False)
def fails_once_only() -> None:
    raise ValueError("no retries")


@job(track=True)
def huge() -> str:
    return "y" * 10_000


@job(track=True)
def not_json() -> object:
    return object()


@job
def untracked() -> int:
    current_status().set(progress=50)  # no-op outside a tracked job
    wurk.redis.rpush("t:untracked", 1)
    return 1


class Tracked(Job):
    track = True

    async def perform(self, x: int) -> int:
        return x * 2


def status(jid: str) -> JobStatus | None:
    return JobStatus.get(jid)


def state(jid: str) -> str | None:
    s = status(jid)
    return s.state if s else None


def test_a_pushed_job_is_enqueued(r: Any, wurk: Wurk) -> None:
    jid = add.perform_async(2, 3)
    s = status(jid)
    assert s is not None and s.state == "enqueued" and s.job_class == "tests.test_status.add"
    assert s.queue == "default" and s.enqueued_at and s.started_at is None
    assert 0 < (s.expires_in or 0) <= 1800
    assert r.ttl(f"status:{jid}") > 1700
    assert json.loads(r.lindex("queue:default", 0))["track"] is True
    later = add.perform_in(60, 1, 2)
    assert status(later).state == "enqueued"  # type: ignore[union-attr]
    assert r.hget(f"status:{later}", "at")


def test_the_outcome_and_progress_are_kept(r: Any, workers: Launcher) -> None:
    jid = add.perform_async(2, 3)
    wait_for(lambda: state(jid) == "succeeded")
    s = status(jid)
    assert s is not None and s.result == 5 and s.finished and s.started_at and s.finished_at
    assert s.error is None and s.result_withheld is None

    jid = reports.perform_async(4)
    wait_for(lambda: state(jid) == "succeeded")
    s = status(jid)
    assert s is not None
    assert (s.progress, s.message, s.result) == (100.0, "step 4 of 4", {"steps": 4})

    jid = Tracked.perform_async(21)  # an async job: its awaited value is the result
    wait_for(lambda: state(jid) == "succeeded")
    assert status(jid).result == 42  # type: ignore[union-attr]


def test_progress_is_visible_while_the_job_runs(r: Any, workers: Launcher) -> None:
    jid = waits.perform_async("t:go")
    wait_for(lambda: state(jid) == "running" and status(jid).progress == 10.0)  # type: ignore[union-attr]
    assert status(jid).message == "waiting"  # type: ignore[union-attr]
    r.set("t:go", 1)
    wait_for(lambda: state(jid) == "succeeded")


def test_progress_writes_are_throttled(wurk: Wurk, r: Any) -> None:
    from django_wurk.core.features.status.reporter import StatusReporter

    reporter = StatusReporter(wurk, "j1")
    reporter.set(progress=1)
    reporter.set(progress=2, message="held back")
    assert r.hget("status:j1", "progress") == b"1.0"
    reporter.flush()
    assert r.hget("status:j1", "progress") == b"2.0" and r.hget("status:j1", "message") == b"held back"
    assert FLUSH_EVERY == 5.0
    for bad in (-1, 101, "50", True, float("nan")):
        with pytest.raises(ValueError, match="progress"):
            reporter.set(progress=bad)


def test_failures_retrying_then_dead_and_failed_without_retries(r: Any, workers: Launcher) -> None:
    jid = always_fails.perform_async()
    wait_for(lambda: state(jid) == "retrying")
    s = status(jid)
    assert s is not None and s.error and s.error.startswith("RuntimeError: boom")
    assert len(s.error.encode()) <= 1024
    # Make its one retry due now: the second failure exhausts the retries.
    (member,) = r.zrange("retry", 0, -1)
    r.zadd("retry", {member: 0})
    wait_for(lambda: state(jid) == "dead", timeout=15)
    assert status(jid).retry_count == 0  # type: ignore[union-attr]  # the attempt that ran last

    jid = fails_once_only.perform_async()
    wait_for(lambda: state(jid) == "failed")
    assert status(jid).error == "ValueError: no retries"  # type: ignore[union-attr]


def test_a_result_too_large_or_not_json_is_withheld_saying_why(r: Any, workers: Launcher) -> None:
    big, odd = huge.perform_async(), not_json.perform_async()
    wait_for(lambda: state(big) == "succeeded" and state(odd) == "succeeded")
    assert "too large" in (status(big).result_withheld or "")  # type: ignore[union-attr]
    assert status(big).result is None  # type: ignore[union-attr]
    assert "not JSON" in (status(odd).result_withheld or "")  # type: ignore[union-attr]


def test_untracked_jobs_write_no_status(r: Any, workers: Launcher) -> None:
    jid = untracked.perform_async()
    wait_for(lambda: r.llen("t:untracked") == 1)
    assert JobStatus.get(jid) is None and not r.keys("status:*")


def test_retention_is_the_setting_and_delete_forgets(wurk: Wurk, r: Any, test_config: Any) -> None:
    wurk.configure(test_config.with_section(StatusSettings(status_retention=60)))
    jid = add.perform_async(1, 1)
    assert 0 < r.ttl(f"status:{jid}") <= 60
    assert JobStatus.delete(jid) and JobStatus.get(jid) is None
    with pytest.raises(ValueError, match="track"):
        add.set(track="yes")


def test_a_status_written_by_anyone_reads_field_by_field(r: Any, wurk: Wurk) -> None:
    r.hset("status:h", mapping={"state": b"\xff\xfe", "progress": "nan", "result": "{not json", "retry_count": "1e400",
                                "started_at": "9" * 400, "message": "m" * 20_000, "class": "<script>"})  # fmt: skip
    s = JobStatus.get("h")
    assert s is not None and s.state == "\ufffd\ufffd" and s.progress is None and s.result is None
    assert s.result_withheld and s.result_withheld.startswith("unreadable") and s.retry_count is None
    assert s.started_at is None and s.message and len(s.message) < 9000
    r.rpush("status:list", "x")
    assert JobStatus.get("status-list") is None and JobStatus.get("list") is None
    json.dumps(s.__dict__)  # every field is plain data


def test_the_testing_modes_write_no_status(r: Any, wurk: Wurk) -> None:
    from django_wurk import testing

    with testing.fake() as queues:
        add.perform_async(1, 2)
        queues.drain()
    with testing.inline():
        add.perform_async(1, 2)
    assert not r.keys("status:*")
