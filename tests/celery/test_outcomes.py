"""Retries, failures, expiry and results of Celery-style tasks on a real worker and Redis."""

from __future__ import annotations

import decimal
import json
import time
import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest

from django_wurk.api import DeadSet, RetrySet
from django_wurk.celery import AsyncResult, MaxRetriesExceededError, TaskRevokedError, TimeoutError, states
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.conftest import wait_for


def test_self_retry_runs_again_with_the_retry_count(celery_workers: Launcher, r: Any) -> None:
    result = tasks.flaky.delay("k", 2)
    assert result.get(timeout=10) == "ok after 2"
    assert tasks.CALLS["k"] == [0, 1, 2]
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0


def test_a_retry_waits_in_the_retry_set_with_its_exact_countdown(celery_workers: Launcher, r: Any) -> None:
    celery_workers.stop()  # so the entry can be read before it comes back
    result = tasks.flaky.apply_async(("seen", 1))
    from django_wurk.core.engine import Execution, wurk
    from django_wurk.core.worker.retry import RetryHandler

    raw = r.rpop("queue:default")
    execution = Execution(wurk, json.loads(raw))
    with pytest.raises(Exception) as caught:
        execution.run()
    before = time.time()
    assert RetryHandler(wurk).handle(raw, "default", execution.job, caught.value) == "retry"
    [(member, score)] = r.zrange("retry", 0, -1, withscores=True)
    entry = json.loads(member)
    assert entry["jid"] == result.id and entry["retry_count"] == 0 and entry["error_class"] == "Retry"
    assert before + 0.1 < score <= time.time() + 0.2  # countdown=0.2, no Sidekiq jitter added
    assert result.state == states.RETRY
    assert [e.jid for e in RetrySet(wurk)] == [result.id]


def test_max_retries_exceeded_fails_the_task_into_the_dead_set(celery_workers: Launcher, r: Any) -> None:
    result = tasks.flaky.delay("m", 5)  # max_retries=2: the third retry is refused
    with pytest.raises(MaxRetriesExceededError, match="Can't retry"):
        result.get(timeout=10)
    assert tasks.CALLS["m"] == [0, 1, 2]
    assert result.state == states.FAILURE and result.failed()
    dead = wait_for(lambda: list(DeadSet()))
    assert dead[0].jid == result.id and dead[0].error_class == "MaxRetriesExceededError"
    assert dead[0].get("retry_count") == 2  # Sidekiq counts the last failure too


def test_retry_with_exc_raises_that_exc_once_retries_run_out(celery_workers: Launcher) -> None:
    result = tasks.retry_with_exc.delay("e")
    with pytest.raises(tasks.TemporaryError, match="still down"):
        result.get(timeout=10)
    assert tasks.CALLS["e"] == [0, 1]


def test_a_plain_exception_is_a_failure_with_no_retry(celery_workers: Launcher, r: Any) -> None:
    result = tasks.boom.delay("kaput")
    with pytest.raises(ValueError, match="kaput"):
        result.get(timeout=10)
    assert result.state == states.FAILURE
    assert "ValueError: kaput" in (result.traceback or "")
    assert isinstance(result.result, ValueError)
    assert r.zcard("retry") == 0
    wait_for(lambda: r.zcard("dead") == 1)
    assert result.get(timeout=1, propagate=False).args == ("kaput",)


def test_autoretry_for_with_backoff(celery_workers: Launcher, r: Any) -> None:
    started = time.monotonic()
    result = tasks.auto.delay("a", 2)
    assert result.get(timeout=15) == 2
    assert tasks.CALLS["a"] == [0, 1, 2]
    assert time.monotonic() - started >= 1.9  # backoff 1 s, then 2 s capped to retry_backoff_max=1


def test_autoretry_leaves_other_exceptions_alone(celery_workers: Launcher) -> None:
    result = tasks.auto.delay("p", 0, permanent=True)
    with pytest.raises(tasks.PermanentError):
        result.get(timeout=10)
    assert tasks.CALLS["p"] == [0]


def test_an_expired_task_does_not_run(celery_workers: Launcher, r: Any) -> None:
    celery_workers.stop()
    result = tasks.record.apply_async(("x", 1), expires=0.05)
    time.sleep(0.1)  # let the expiry pass while no worker runs; nothing to poll for
    worker = Launcher(celery_workers.wurk)
    worker.start()
    try:
        with pytest.raises(TaskRevokedError):
            result.get(timeout=10)
    finally:
        worker.stop()
    assert result.state == states.REVOKED and "x" not in tasks.CALLS
    assert r.get("stat:expired") == b"1"  # skipped by the expiring-jobs feature, counted there


def test_ignore_result_stores_nothing(celery_workers: Launcher, r: Any) -> None:
    result = tasks.fire_and_forget.delay("i")
    wait_for(lambda: tasks.CALLS.get("i"))
    other = tasks.record.apply_async(("j", 1), ignore_result=True)
    wait_for(lambda: tasks.CALLS.get("j"))
    assert result.state == other.state == states.PENDING
    assert r.keys("celery-task-meta-*") == []


def test_get_times_out_on_a_task_nobody_runs(wurk: Any) -> None:
    result = tasks.add.delay(1, 2)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        result.get(timeout=0.3)
    assert 0.25 < time.monotonic() - started < 2
    assert AsyncResult(result.id).state == states.PENDING and not AsyncResult(result.id).exists()


def test_kombu_types_survive_the_round_trip(celery_workers: Launcher, r: Any) -> None:
    values = (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), decimal.Decimal("1.10"), uuid.uuid4(), b"\xff\x00")
    result = tasks.echo_types.apply_async(values, {"day": date(2026, 1, 1)})
    payload = json.loads(r.lindex("queue:default", 0) or b"{}") if r.llen("queue:default") else None
    assert result.get(timeout=10) == [*values, date(2026, 1, 1)]
    if payload is not None:  # the worker may already have taken it
        assert payload["args"][1] == {"__type__": "decimal", "__value__": "1.10"}


def test_countdown_runs_the_task_later(celery_workers: Launcher) -> None:
    started = time.monotonic()
    assert tasks.add.apply_async((1, 1), countdown=0.5).get(timeout=10) == 2
    assert time.monotonic() - started >= 0.5


def test_a_return_value_json_cannot_carry_is_recorded_not_failed(celery_workers: Launcher, r: Any) -> None:
    result = tasks.returns_a_set.delay()
    value = result.get(timeout=10)
    assert result.state == states.SUCCESS and value["unencodable_result"] == "{1, 2}"
    assert r.zcard("dead") == 0
