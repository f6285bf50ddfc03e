"""The tasks the Celery drain's tests move messages to, under the names a Celery project used.

Each run is recorded in wurk's Redis (``celery-drain:runs``), with the type of every argument,
so a test can see what a worker in another process received.
"""

from __future__ import annotations

import json
from typing import Any

from django_wurk import wurk
from django_wurk.celery import shared_task

RUNS = "celery-drain:runs"


def _shown(value: Any) -> list[str]:
    return [type(value).__name__, str(value)]


@shared_task(bind=True, name="legacy.add")
def add(self: Any, *args: Any, **kwargs: Any) -> None:
    record = {
        "id": self.request.id,
        "retries": self.request.retries,
        "args": [_shown(a) for a in args],
        "kwargs": {k: _shown(v) for k, v in kwargs.items()},
    }
    wurk.redis.rpush(RUNS, json.dumps(record))


@shared_task(bind=True, name="legacy.append")
def append(self: Any, trail: list[str], item: str) -> list[str]:
    """A chain step whose result shows every step before it, in the order they ran."""
    wurk.redis.rpush(
        RUNS, json.dumps({"id": self.request.id, "retries": 0, "args": [trail, item], "kwargs": {}})
    )
    return [*trail, item]
