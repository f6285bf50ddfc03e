"""Calling Celery-style tasks: the payload each call pushes, and the run on a real worker."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.celery import AsyncResult, UnsupportedOptionWarning, lookup, states
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.conftest import queue_entries


def test_lookup_finds_tasks_by_their_celery_name() -> None:
    assert lookup("tests.celery.celery_style_tasks.add") is tasks.add
    assert lookup("custom.multiply") is tasks.multiply
    assert lookup("tests.celery.celery_style_tasks.nothing") is None


def test_calling_a_task_runs_the_function_here() -> None:
    assert tasks.add(2, 3, scale=2) == 10
    assert tasks.whoami()["id"] is None  # called directly: an empty request, as in Celery


def test_delay_pushes_a_sidekiq_job_with_kwargs_in_a_payload_key(wurk: Wurk, r: Any) -> None:
    result = tasks.add.delay(2, 3, scale=10)
    assert isinstance(result, AsyncResult) and len(result.id) == 24
    [payload] = queue_entries(r)
    assert payload["class"] == "tests.celery.celery_style_tasks.add"
    assert payload["args"] == [2, 3] and payload["kwargs"] == {"scale": 10}
    assert payload["jid"] == result.id and payload["queue"] == "default" and payload["retry"] == 0
    assert r.smembers("queues") == {b"default"}


def test_a_celery_task_id_becomes_the_jid(wurk: Wurk, r: Any) -> None:
    task_id = str(uuid.uuid4())
    result = tasks.add.apply_async((1, 2), task_id=task_id)
    assert result.id == task_id
    assert queue_entries(r)[0]["jid"] == task_id
    with pytest.raises(ValueError, match="task_id"):
        tasks.add.apply_async((1, 2), task_id="has space")


def test_queue_from_the_task_and_from_the_call(wurk: Wurk, r: Any) -> None:
    tasks.multiply.delay(2, 3)
    tasks.add.apply_async((1, 2), queue="math")
    assert [p["class"] for p in queue_entries(r, "math")] == [
        "tests.celery.celery_style_tasks.add",
        "custom.multiply",
    ]


def test_countdown_and_eta_schedule_the_job(wurk: Wurk, r: Any) -> None:
    before = time.time()
    tasks.add.apply_async((1, 2), countdown=60)
    eta = datetime.now(UTC) + timedelta(hours=1)
    tasks.add.apply_async((1, 2), eta=eta)
    tasks.add.apply_async((1, 2), eta=(eta + timedelta(hours=1)).isoformat())  # a Celery header's text
    scores = sorted(score for _, score in r.zrange("schedule", 0, -1, withscores=True))
    assert before + 59 < scores[0] < time.time() + 61
    assert scores[1] == pytest.approx(eta.timestamp(), abs=0.01)
    assert scores[2] == pytest.approx(eta.timestamp() + 3600, abs=0.01)
    assert r.llen("queue:default") == 0
    tasks.add.apply_async((1, 2), eta=datetime.now(UTC) - timedelta(minutes=1))  # already due: now
    assert r.llen("queue:default") == 1


def test_expires_is_carried_as_an_absolute_expiry(wurk: Wurk, r: Any) -> None:
    tasks.add.apply_async((1, 2), expires=30)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    tasks.add.apply_async((1, 2), expires=at)
    tasks.add.apply_async((1, 2), expires="2030-01-01T00:00:00+00:00")
    expiries = [p["expires_at"] for p in reversed(queue_entries(r))]
    assert time.time() + 28 < expiries[0] < time.time() + 31
    assert expiries[1] == expiries[2] == at.timestamp()


def test_priority_orders_a_run_in_its_queue(wurk: Wurk, r: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedOptionWarning)
        tasks.add.apply_async((1, 2), priority=5)
        tasks.add.apply_async((1, 2), priority=0)
    [payload] = queue_entries(r, "default@5")
    assert payload["priority"] == 5 and payload["queue"] == "default"
    assert "priority" not in queue_entries(r)[0]
    with pytest.raises(ValueError, match="priority must be an integer from -100 to 100"):
        tasks.add.apply_async((1, 2), priority=255)


def test_a_task_runs_on_a_worker_and_its_result_comes_back(celery_workers: Launcher, r: Any) -> None:
    result = tasks.add.delay(2, 3, scale=10)
    assert result.get(timeout=10) == 50
    assert result.state == result.status == states.SUCCESS
    assert result.ready() and result.successful() and not result.failed()
    stored = json.loads(r.get(f"celery-task-meta-{result.id}"))
    assert stored["status"] == "SUCCESS" and stored["result"] == 50 and stored["task_id"] == result.id
    assert 86000 < r.ttl(f"celery-task-meta-{result.id}") <= 86400


def test_a_bound_task_sees_its_request(celery_workers: Launcher) -> None:
    task_id = str(uuid.uuid4())
    seen = tasks.whoami.apply_async(("a",), {"tag": "b"}, task_id=task_id).get(timeout=10)
    assert seen == {"id": task_id, "retries": 0, "args": ["a"], "kwargs": {"tag": "b"},
                    "name": "tests.celery.celery_style_tasks.whoami"}  # fmt: skip
