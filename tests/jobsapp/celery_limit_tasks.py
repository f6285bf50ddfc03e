"""A Celery task blocked past its ``time_limit``, for tests/faults/test_celery_time_limit_swarm.py:
``runwurk -P 2`` children must record its FAILURE before they are replaced."""

from __future__ import annotations

import time

from django_wurk import wurk
from django_wurk.celery import shared_task


@shared_task(name="limits.blocked", time_limit=1)
def blocked(seconds: float) -> str:
    wurk.redis.rpush("limits:started", str(seconds))
    time.sleep(seconds)  # one C call: only the watchdog's giving up ends this run
    wurk.redis.rpush("limits:returned", str(seconds))
    return "returned"


@shared_task(name="limits.on_error")
def on_error(task_id: str) -> None:
    wurk.redis.rpush("limits:errback", task_id)
