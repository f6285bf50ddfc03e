"""Celery's ``celery.signals``, for ``from django_wurk.celery.signals import task_success``.

The task signals are Celery's, with Celery's arguments, sent by the worker around each run
(``django_wurk.celery.dispatch``):

* ``task_prerun(sender=task, task_id, task, args, kwargs)``
* ``task_postrun(sender=task, task_id, task, args, kwargs, retval, state)``
* ``task_success(sender=task, result)``
* ``task_failure(sender=task, task_id, exception, args, kwargs, traceback, einfo)``
  (``einfo`` is the formatted traceback text, not Celery's ``ExceptionInfo``)
* ``task_retry(sender=task, request, reason, einfo)``
* ``task_revoked(sender=task, request, terminated=False, signum=None, expired=True)``: an
  expired task (the only kind of revocation here)

The worker's are django-wurk's own Django signals (``django_wurk.signals``), read on first
use so this module can be imported without Django: ``worker_ready`` is ``worker_ready`` and
``worker_shutdown`` is ``worker_stopping``; their receivers get ``sender`` and ``identity``.
Celery's other signals (``before_task_publish``, ``celeryd_init``, ``beat_init``...) do not
exist here: there is no message publishing or worker boot that could send them.
"""

from __future__ import annotations

from typing import Any

from django_wurk.celery.dispatch import (
    Signal,
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    task_revoked,
    task_success,
)

#: Celery's worker signals -> django_wurk.signals' names.
_WORKER = {"worker_ready": "worker_ready", "worker_shutdown": "worker_stopping"}


def __getattr__(name: str) -> Any:
    if name in _WORKER:
        from django_wurk import signals

        return getattr(signals, _WORKER[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Signal",
    "task_failure",
    "task_postrun",
    "task_prerun",
    "task_retry",
    "task_revoked",
    "task_success",
    "worker_ready",  # noqa: F822 (read on first use, by __getattr__)
    "worker_shutdown",  # noqa: F822
]
