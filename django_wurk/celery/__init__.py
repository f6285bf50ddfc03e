"""Celery's task API on django-wurk: move a Celery project by changing its imports.

    from django_wurk.celery import shared_task

    @shared_task(bind=True, max_retries=5, autoretry_for=(ConnectionError,), retry_backoff=True)
    def fetch(self, url): ...

    fetch.delay("https://example.com")          # an AsyncResult, at once
    fetch.apply_async(("https://...",), countdown=60, queue="net", expires=3600)

Tasks are wurk jobs (the payload is a Sidekiq job the dashboard shows); arguments go
through kombu's JSON codec as in Celery; results are stored as Celery's Redis result
backend stores them. What maps to what, and what behaves differently: docs/migrate-from-celery.md.
It imports nothing from Django; the Django app imports the ``tasks`` modules that
``app.autodiscover_tasks()`` asks for.
"""

from django_wurk.celery import builtins as _builtins  # noqa: F401 (defines celery.map, celery.starmap)
from django_wurk.celery import states
from django_wurk.celery.canvas import (
    GroupResult,
    Signature,
    chain,
    chord,
    chunks,
    group,
    signature,
    subtask,
    xmap,
    xstarmap,
)
from django_wurk.celery.exceptions import (
    MaxRetriesExceededError,
    RemoteTaskError,
    Retry,
    SoftTimeLimitExceeded,
    TaskRevokedError,
    TimeLimitExceeded,
    TimeoutError,
    UnsupportedOptionWarning,
)
from django_wurk.celery.results import AsyncResult
from django_wurk.celery.task import Celery, EagerResult, Request, Task, current_app, lookup, shared_task

__all__ = [
    "AsyncResult",
    "Celery",
    "EagerResult",
    "GroupResult",
    "MaxRetriesExceededError",
    "RemoteTaskError",
    "Request",
    "Retry",
    "Signature",
    "SoftTimeLimitExceeded",
    "Task",
    "TaskRevokedError",
    "TimeLimitExceeded",
    "TimeoutError",
    "UnsupportedOptionWarning",
    "chain",
    "chord",
    "chunks",
    "current_app",
    "group",
    "lookup",
    "shared_task",
    "signature",
    "states",
    "subtask",
    "xmap",
    "xstarmap",
]
