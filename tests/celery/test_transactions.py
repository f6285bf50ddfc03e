"""Celery tasks enqueued inside a database transaction: pushed on commit, id returned at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from django_wurk import Wurk
from django_wurk.celery import AsyncResult
from tests.celery import celery_style_tasks as tasks

pytestmark = pytest.mark.django_db(transaction=True)


def queued_jids(r: Any) -> list[str]:
    return [json.loads(x)["jid"] for x in reversed(r.lrange("queue:default", 0, -1))]


def test_delay_inside_atomic_returns_the_result_and_pushes_at_commit(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        result = tasks.add.delay(1, 2)
        assert isinstance(result, AsyncResult) and len(result.id) == 24
        assert r.llen("queue:default") == 0
    assert queued_jids(r) == [result.id]


def test_nothing_is_pushed_on_rollback(wurk: Wurk, r: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.delay_on_commit(1, 2)
        raise RuntimeError
    assert r.llen("queue:default") == 0


def test_delay_on_commit_returns_the_result_unlike_celery(wurk: Wurk, r: Any, use_app_settings: Any) -> None:
    use_app_settings(enqueue="immediate")
    with transaction.atomic():
        pushed_now = tasks.add.delay(1, 2)
        deferred = tasks.add.delay_on_commit(3, 4)
        later = tasks.add.apply_async_on_commit((5, 6), countdown=60)
        assert queued_jids(r) == [pushed_now.id]  # ENQUEUE="immediate", but on_commit asked for
    assert queued_jids(r) == [pushed_now.id, deferred.id]
    assert r.zcard("schedule") == 1 and later.id in r.zrange("schedule", 0, -1)[0].decode()
