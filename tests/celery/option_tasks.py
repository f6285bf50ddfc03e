"""Tasks for tests/celery/test_options.py: time limits, rate limits, callbacks, map/starmap.

Each records what it saw in Redis (through the engine the test configured), so a test reads
what the worker did without sleeping.
"""

import time

from django_wurk.celery import shared_task
from django_wurk.celery.exceptions import SoftTimeLimitExceeded


def _redis():
    from django_wurk.core.engine import wurk

    return wurk.redis


@shared_task(time_limit=1)
def sleeps(seconds):
    """One sleep in C: no exception reaches it, so the watchdog gives up on it."""
    time.sleep(seconds)
    return "slept"


@shared_task(time_limit=1)
def naps(seconds):
    """Short sleeps: Python runs between them, so ``TimeLimitExceeded`` lands in the task."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    return "napped"


@shared_task
def naps_unlimited(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    return "napped"


@shared_task(soft_time_limit=0.5)
def cleans_up(key):
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            time.sleep(0.02)
    except SoftTimeLimitExceeded:
        _redis().rpush(key, "cleaned up")
        return "cleaned up"
    return "never interrupted"


@shared_task(rate_limit="5/s")
def counted(key):
    _redis().rpush(key, repr(time.time()))


@shared_task
def record(value, key):
    _redis().rpush(key, repr(value))
    return value


@shared_task
def on_error(request, exc, traceback):
    """A Celery 5 errback: called in the worker with the failed task's request and error."""
    _redis().rpush("errback:new", f"{request.id} {type(exc).__name__}")


@shared_task
def on_error_by_id(task_id):
    """An old-style errback: sent as a task with the failed task's id."""
    _redis().rpush("errback:old", task_id)


@shared_task
def square(x):
    return x * x


@shared_task
def total(values):
    return sum(values)
