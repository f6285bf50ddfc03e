"""The wurk job behind each Celery task: what a worker runs when it fetches one.

Every task gets its own registered ``Job`` class whose wire name is the task's Celery name
(``proj.tasks.add``), so the dashboard names it, and only tasks defined in code ever run:
a payload never chooses what to import.

Its payload has ``"retry": 0``: in Celery an exception the task does not turn into a retry
(``self.retry()``, ``autoretry_for``) is a FAILURE, so here it goes straight to the dead set,
where it can still be retried by hand. A retry the task asks for is a ``Retry`` exception,
which ``retry_requested`` hands to the engine as an exact delay: the job lands in the retry
set (``retry_count`` counts Celery's retries) and comes back at that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, Protocol

from django_wurk.celery.exceptions import Retry, SoftTimeLimitExceeded, TimeLimitExceeded
from django_wurk.core.control import Cancelled
from django_wurk.core.engine import Wurk
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.features.expiring import EXPIRES_AT
from django_wurk.core.features.expiring.option import deadline
from django_wurk.core.job import Job
from django_wurk.core.wire import Payload


class Runner(Protocol):
    """What runs the task for the job: the ``Task`` (named here, not imported: it builds this class)."""

    def execute(self, job: CeleryJob, args: list[Any], kw: dict[str, Any]) -> Any: ...

    def record_given_up(self, job: CeleryJob, failure: BaseException) -> None: ...

    def record_revoked(self, task_id: str, payload: Payload, expired: bool = True) -> None: ...


class CeleryJob(Job, abstract=True):
    task: ClassVar[Runner]
    retry = 0
    #: What the timeouts watchdog raises at the ``time_limit`` and ``soft_time_limit``
    #: (the payload's ``timeout`` and ``soft_timeout``): Celery's classes, which tasks catch.
    timeout_error: ClassVar[type[TimeLimitExceeded]] = TimeLimitExceeded
    soft_timeout_error: ClassVar[type[SoftTimeLimitExceeded]] = SoftTimeLimitExceeded

    #: Set when the timeouts watchdog gave up on this run (blocked past its ``time_limit``):
    #: if its thread ever comes back, the task records nothing more.
    abandoned: bool = False

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        return type(self).task.execute(self, list(args), kwargs)

    def given_up(self, failure: BaseException) -> None:
        """The watchdog failed this run without its thread (``TimeLimitExceeded``): the task's
        FAILURE, its ``link_error`` and ``task_failure`` are recorded here instead."""
        self.abandoned = True
        type(self).task.record_given_up(self, failure)

    def retry_requested(self, exc: BaseException) -> float | None:
        if not isinstance(exc, Retry):
            return None
        when = exc.when
        if isinstance(when, datetime):
            return max(when.timestamp() - time.time(), 0.0)
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            return max(float(when), 0.0)
        return 0.0


class RecordRevoked:
    """Server middleware: a Celery task revoked before or while it ran gets a REVOKED result.

    Two ways to be revoked, one record: a task whose ``expires_at`` has passed (the
    expiring-jobs feature's middleware, which runs after this one, then skips the job and
    counts it in ``stat:expired``), and a task cancelled (``revoke()``, which is
    ``django_wurk.cancel``: ``Cancelled`` passes out through here, whether it ended at its
    start, while it ran, or was removed from its queue and recorded). This one only writes
    what Celery's result would say, so ``AsyncResult.get()`` raises ``TaskRevokedError``
    instead of waiting for a run that will never come.

    No ``payload_keys``: a cancelled task need carry no key of its own.
    """

    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        if not isinstance(job, CeleryJob):
            call_next()
            return
        limit = deadline(payload.get(EXPIRES_AT))
        if limit is not None and time.time() > limit:
            type(job).task.record_revoked(str(payload.get("jid", "")), payload)
        try:
            call_next()
        except Cancelled:
            type(job).task.record_revoked(str(payload.get("jid", "")), payload, expired=False)
            raise


def plug(wurk: Wurk) -> Plug:
    return Plug(server=RecordRevoked())


#: Celery's REVOKED record, just outside the expiry check that skips the job and the cancel
#: check that ends it (the cancel feature places itself inside this one); inside batches,
#: which count the skipped job done on its way out. A ``Celery`` app adds it when made.
FEATURE = Feature("celery_revoked", plug, server_place=Place(inside=("batches",), outside=("expiring",)))
