"""django.tasks functions the suite runs through WurkBackend on real workers."""

from __future__ import annotations

import json
from typing import Any

from django_wurk import wurk

try:
    from django.tasks import TaskContext, task
except ImportError:
    from django_tasks import TaskContext, task  # type: ignore[no-redef]


@task()
def add(a: int, b: int, *, scale: int = 1) -> int:
    return (a + b) * scale


@task(queue_name="tasks", retry=1)
def flaky_task(label: str) -> None:
    raise ValueError(f"task failed: {label}")


@task(retry=False)
def fails_once_for_good() -> None:
    raise KeyError("no retries")


@task(takes_context=True)
def with_context(context: TaskContext, note: str) -> dict[str, Any]:
    return {"id": context.task_result.id, "attempt": context.attempt, "note": note}


@task()
async def async_double(n: int) -> int:
    return n * 2


@task()
def record_task(value: Any) -> None:
    wurk.redis.rpush("seen:record_task", json.dumps(value))


#: The running loop of each ``loop_bound`` run, in run order (in-process workers).
task_loops: list[Any] = []


@task()
async def loop_bound() -> str:
    """Reports where it ran: the worker thread's own loop, kept from one run to the next."""
    import asyncio
    import threading

    task_loops.append(asyncio.get_running_loop())
    await asyncio.sleep(0)
    return threading.current_thread().name
