"""Celery-style tasks, written as for Celery: only the import line names django-wurk.

tests/celery/test_same_module.py swaps that line for ``from celery import shared_task`` and
runs these tasks on a real Celery app too, so this module stays plain Celery code.
"""

import datetime
import decimal
import uuid

from django_wurk.celery import shared_task

CALLS = {}


class TemporaryError(Exception):
    pass


class PermanentError(Exception):
    pass


@shared_task
def add(x, y, scale=1):
    return (x + y) * scale


@shared_task(name="custom.multiply", queue="math")
def multiply(x, y):
    return x * y


@shared_task(bind=True)
def whoami(self, *args, **kwargs):
    return {
        "id": self.request.id,
        "retries": self.request.retries,
        "args": self.request.args,
        "kwargs": self.request.kwargs,
        "name": self.name,
    }


@shared_task
def echo_types(when, amount, ident, blob, day=None):
    assert isinstance(when, datetime.datetime) and isinstance(amount, decimal.Decimal)
    assert isinstance(ident, uuid.UUID) and isinstance(blob, bytes) and isinstance(day, datetime.date)
    return [when, amount, ident, blob, day]


@shared_task(bind=True, max_retries=2, default_retry_delay=0.2)
def flaky(self, key, succeed_after):
    CALLS.setdefault(key, []).append(self.request.retries)
    if self.request.retries < succeed_after:
        raise self.retry(countdown=0.2)
    return f"ok after {self.request.retries}"


@shared_task(bind=True, max_retries=1)
def retry_with_exc(self, key):
    CALLS.setdefault(key, []).append(self.request.retries)
    try:
        raise TemporaryError("still down")
    except TemporaryError as exc:
        raise self.retry(exc=exc, countdown=0.1) from exc


@shared_task(
    autoretry_for=(TemporaryError,),
    dont_autoretry_for=(PermanentError,),
    retry_backoff=True,
    retry_backoff_max=1,
    retry_jitter=False,
    max_retries=3,
    bind=True,
)
def auto(self, key, fail_times, permanent=False):
    CALLS.setdefault(key, []).append(self.request.retries)
    if permanent:
        raise PermanentError("no point retrying")
    if self.request.retries < fail_times:
        raise TemporaryError(f"attempt {self.request.retries}")
    return self.request.retries


@shared_task
def boom(message):
    raise ValueError(message)


@shared_task(ignore_result=True)
def fire_and_forget(key):
    CALLS.setdefault(key, []).append(1)
    return "not stored"


@shared_task
def record(key, value):
    CALLS.setdefault(key, []).append(value)
    return value


@shared_task
def collect(values, key):
    CALLS.setdefault(key, []).append(values)
    return values


@shared_task
def returns_a_set():
    return {1, 2}
