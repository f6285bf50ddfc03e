"""Celery's ``revoke``: ``app.control.revoke(id)`` and ``AsyncResult(id).revoke()``, as a cancel.

A revoked task is a cancelled job (``django_wurk.cancel``, docs/cancel.md): one still
waiting (queued, counting down, or waiting for its retry) is removed and never runs; one
fetched never starts; one running sees ``current_job().cancelled`` and is stopped after
``WURK["CANCEL_GRACE"]``. Its result says REVOKED (``celery.job.RecordRevoked`` writes it
as the job ends), so ``get()`` raises ``TaskRevokedError``.

Two differences from Celery, both on the side of stopping the task: ``terminate=False``
does not spare a running task (the cancel flag is one for all), and ``signal`` is not sent
to any process (the job is stopped in its thread, the worker lives on). An id that is not
found is remembered for a month (its flag), as a Celery worker remembers revoked ids, so
a task with that id that turns up later does not run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django_wurk.core.features.cancel import cancel


def _ids(task_id: str | Iterable[str]) -> list[str]:
    if isinstance(task_id, str):
        return [task_id]
    ids = list(task_id)
    if not all(isinstance(i, str) for i in ids):
        raise ValueError(f"revoke: task ids must be text, got {ids!r:.200}")
    return ids


def revoke(
    task_id: str | Iterable[str], terminate: bool = False, signal: Any = None, **_ignored: Any
) -> list[str]:
    """Cancel each task id; the ids that were found waiting, scheduled, retrying or running."""
    return [i for i in _ids(task_id) if cancel(i)]


class Control:
    """``app.control``: only ``revoke`` here (workers are steered from the dashboard)."""

    def __init__(self, app: Any = None) -> None:
        self.app = app

    def revoke(
        self, task_id: str | Iterable[str], destination: Any = None, terminate: bool = False,
        signal: Any = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        """As Celery's: returns nothing (``django_wurk.cancel(id)`` says whether it was found)."""
        revoke(task_id, terminate=terminate, signal=signal)

    def terminate(
        self, task_id: str | Iterable[str], destination: Any = None, signal: Any = None, **kwargs: Any
    ) -> None:
        self.revoke(task_id, destination=destination, terminate=True, signal=signal)
