"""Celery's ``revoke``: a cancel (docs/cancel.md), and a REVOKED result."""

from __future__ import annotations

from typing import Any

import pytest

from django_wurk.celery import TaskRevokedError, current_app, states
from django_wurk.core import keys
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks


def test_revoking_a_waiting_task_removes_it_and_its_result_says_revoked(
    celery_workers: Launcher, r: Any
) -> None:
    celery_workers.stop()  # nothing is fetched
    result = tasks.record.apply_async(("r", 1), countdown=3600)
    result.revoke()
    assert r.zcard(keys.SCHEDULE) == 0
    assert result.state == states.REVOKED
    with pytest.raises(TaskRevokedError):
        result.get(timeout=5)
    assert int(r.get(keys.STAT_CANCELLED)) == 1


def test_app_control_revoke_takes_ids_and_a_revoked_id_never_runs(celery_workers: Launcher, r: Any) -> None:
    celery_workers.stop()
    queued = tasks.record.delay("q", 1)
    current_app().control.revoke([queued.id, "never-sent"], terminate=True, signal="SIGKILL")
    assert r.llen("queue:default") == 0
    assert queued.state == states.REVOKED
    # The unknown id is remembered: a task sent later with it does not run.
    late = tasks.record.apply_async(("late", 1), task_id="never-sent")
    worker = Launcher(celery_workers.wurk)
    worker.start()
    try:
        with pytest.raises(TaskRevokedError):
            late.get(timeout=10)
    finally:
        worker.stop()
    assert "q" not in tasks.CALLS and "late" not in tasks.CALLS
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0
