"""Django signals django-wurk sends: a worker's life and each job's, for application code.

The engine names a worker process's moments as events (``core/events.py``) and tells its
features about each job through middleware and handlers; ``FEATURE`` (which the Django app
adds to the engine, ``apps.py``) turns them into Django signals, so a project hooks in the
way it hooks into ``request_started`` or ``post_save``, and a Celery project finds what it
knew as ``worker_ready``, ``task_prerun``, ``task_postrun``/``task_success``,
``task_failure`` and ``task_retry``. ``docs/signals.md`` lists them with their arguments.

Receivers are called on the thread that reached the moment (a job's own thread for the job
signals), so they should be quick. One that raises is logged (Django's ``send_robust``) and
neither fails the job nor stops the worker. A signal with no receiver costs a job nothing
but a look at an empty list.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.dispatch import Signal

from django_wurk.core import activejob
from django_wurk.core.feature import Feature, Place, Plug

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.events import Process
    from django_wurk.core.job import Job
    from django_wurk.core.wire import Payload

__all__ = [
    "job_died",
    "job_failed",
    "job_retried",
    "job_started",
    "job_succeeded",
    "push_failed",
    "worker_quieting",
    "worker_ready",
    "worker_stopping",
]

#: Sent when jobs pushed after a commit could not reach Redis after every retry, or were
#: still waiting for a retry when the process exited. Arguments: ``payloads`` (list of job
#: dicts), ``at`` (epoch or None), ``error`` (the last exception). With
#: ``WURK["ENQUEUE"] = "outbox"`` nothing is lost: the rows stay for the relay.
push_failed = Signal()

# A worker process's life. ``sender``: the process (``django_wurk.core.events.Process``);
# ``identity``: its ``host:pid:nonce``, as the dashboard and Sidekiq's process set show it.

#: The process runs: its heartbeat went out, it takes jobs from now on (Celery's ``worker_ready``).
worker_ready = Signal()
#: It stopped taking new jobs (TSTP, or the start of a stop); running jobs go on.
worker_quieting = Signal()
#: It is stopping (TERM): sent before it waits for the running jobs (Celery's ``worker_shutdown``).
worker_stopping = Signal()

# A job's life. ``sender``: the job's class (``None`` when no job is registered under the
# payload's name); ``jid``; ``payload``: the job as read from Redis (an encrypted argument
# still sealed); ``queue``.

#: An attempt starts, after every feature let it in: an expired job, a unique job's second
#: copy, a revoked Celery task, a cancelled job never start. Also ``job``: the instance that
#: will ``perform`` (Celery's ``task_prerun``). A job cancelled while it runs sends neither
#: ``job_succeeded`` nor ``job_failed``.
job_started = Signal()
#: The attempt returned. Also ``job`` and ``runtime`` (seconds) (Celery's ``task_success``).
job_succeeded = Signal()
#: The attempt failed, in a worker; then ``job_retried`` or ``job_died`` says what became of
#: it. Also ``exception`` (Celery's ``task_failure``). A job a rate limiter reschedules
#: neither failed nor succeeded: it runs again later, and sends ``job_started`` again.
job_failed = Signal()
#: A failed job was written to the retry set. ``payload`` is the entry as written (its
#: ``retry_count``, ``error_message``); also ``exception`` (Celery's ``task_retry``).
job_retried = Signal()
#: A job went to the dead set or was discarded, whatever the reason: retries exhausted,
#: ``retry=False``, rate limited too many times, killed from the dashboard (in the process
#: that killed it), lost with a worker too often. Also ``exception``.
job_died = Signal()

#: The context the worker gives its error handlers for a job's failed attempt.
JOB_FAILED = "Job raised exception"


def _job_class(wurk: Wurk, payload: Payload) -> type[Any] | None:
    name = payload.get("class")
    if name in activejob.WRAPPERS:
        name = activejob.job_name(payload) or name
    return wurk.registry.resolve(name) if isinstance(name, str) else None


class SignalServerMiddleware:
    """Sends ``job_started`` and ``job_succeeded`` around each attempt."""

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        if not job_started.receivers and not job_succeeded.receivers:
            call_next()
            return
        jid = payload.get("jid", "")
        sender = type(job)
        job_started.send_robust(sender, job=job, jid=jid, payload=payload, queue=queue)
        began = time.monotonic()
        call_next()
        runtime = time.monotonic() - began
        job_succeeded.send_robust(sender, job=job, jid=jid, payload=payload, queue=queue, runtime=runtime)


def plug(wurk: Wurk) -> Plug:
    """The middleware, the handlers and the listeners that send the signals for ``wurk``."""

    def on_error(exc: BaseException, context: dict[str, Any]) -> None:
        payload = context.get("job")
        if context.get("context") == JOB_FAILED and isinstance(payload, dict) and job_failed.receivers:
            job_failed.send_robust(
                _job_class(wurk, payload),
                jid=payload.get("jid", ""),
                payload=payload,
                queue=context.get("queue", payload.get("queue", "default")),
                exception=exc,
            )

    def outcome(signal: Signal) -> Callable[[Payload, BaseException], None]:
        def handler(payload: Payload, exc: BaseException) -> None:
            if signal.receivers:
                sender = _job_class(wurk, payload)
                signal.send_robust(sender, jid=payload.get("jid", ""), payload=payload, exception=exc)

        return handler

    def lifecycle(signal: Signal) -> Callable[[Process], None]:
        def listener(process: Process) -> None:
            signal.send_robust(process, identity=process.identity)

        return listener

    return Plug(
        server=SignalServerMiddleware(),
        on_error=on_error,
        on_retry=outcome(job_retried),
        on_death=outcome(job_died),
        events={
            "startup": lifecycle(worker_ready),
            "quiet": lifecycle(worker_quieting),
            "shutdown": lifecycle(worker_stopping),
        },
    )


FEATURE = Feature(
    "signals",
    plug,
    # "Started" once every feature that may turn a job away let it in (a rate limiter's
    # OverLimit raised in the job passes out through here, and is no failure: the failure
    # is told by the worker's error report, which a rescheduled job never reaches); outside
    # the timeout, whose TimedOut is this attempt's failure.
    server_place=Place(
        inside=("limiters", "unique", "batches", "expiring", "celery_revoked", "cancel"),
        outside=("timeouts",),
    ),
)
