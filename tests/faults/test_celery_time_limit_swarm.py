"""A Celery task blocked in C past its ``time_limit`` under ``runwurk -P 2`` (the default
deployment): the child records the task's FAILURE (``TimeLimitExceeded``) and calls its
``link_error`` once, before it is replaced; the task never runs again."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.celery import AsyncResult, states
from django_wurk.celery.exceptions import TimeLimitExceeded
from tests.conftest import wait_for
from tests.faults.test_swarm import children
from tests.jobsapp import celery_limit_tasks as limits


def test_a_blocked_task_fails_with_time_limit_exceeded_once_and_its_child_is_replaced(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    supervisor = spawn_worker("-P", "2", "-c", "2", WURK_PROCESS_DEAD_AFTER="60")
    try:
        first = wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and c, timeout=30)
        result = limits.blocked.apply_async((30,), link_error=limits.on_error.s())
        with pytest.raises(TimeLimitExceeded, match="time_limit of 1 s"):
            result.get(timeout=30)
        assert result.state == states.FAILURE
        wait_for(
            lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and set(c) != set(first), timeout=30
        )
        wait_for(lambda: r.llen("limits:errback") == 1, timeout=30)
        assert r.lrange("limits:errback", 0, -1) == [result.id.encode()]
        wait_for(lambda: not r.llen("queue:default") and not r.keys("queue:sq|*"), timeout=30)
        [dead] = [json.loads(raw) for raw in r.zrange("dead", 0, -1)]
        assert (dead["jid"], dead["error_class"]) == (result.id, "TimeLimitExceeded")
        assert r.lrange("limits:started", 0, -1) == [b"30"]  # never recovered and run again
        assert r.llen("limits:returned") == 0
        assert AsyncResult(result.id).state == states.FAILURE
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(60)
    assert supervisor.returncode == 0
