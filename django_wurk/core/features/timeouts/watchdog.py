"""The watchdog: stops a job that runs past its ``timeout``.

The server middleware enters every job with a usable ``timeout`` in a ``Deadlines`` table
(the process's, shared with the watchdog) and takes it out when the job returns. The
watchdog, a thread in every worker process, looks at the table every ``TICK`` seconds:

1. At the deadline it raises ``TimedOut`` inside the job's thread. Python code (a loop, a
   sleep in short steps, an ``async def`` job) stops at its next bytecode: the job fails
   like any job that raised, through every middleware, and the retry handler decides.
2. ``GRACE`` seconds later, if the job still has not returned, it is blocked in C code or a
   socket where no exception reaches it. The watchdog gives up on it: ``TimedOut`` is
   recorded as its outcome (retry set, dead set or discard, by its retry rules, exactly
   once), the job is acknowledged, and then
   A job object with a ``given_up(failure)`` method is told then (the Celery layer writes
   the task's FAILURE result with it);
   * in a plain worker (``runwurk``, ``-P 1``) the stuck thread is left running as a
     daemon and a new thread takes its slot; if it ever returns, it records nothing;
   * in a swarm child (``runwurk -P N``) the process leaves the process set and exits,
     and the supervisor starts a fresh one: the stuck thread dies with it, and the
     process's other running jobs are recovered from its private list by the reaper.

A job may also have a ``soft_timeout``: at that deadline ``SoftTimedOut`` is raised inside it,
once, and nothing else happens (the job may catch it and clean up). A job class chooses the
classes raised with ``timeout_error`` and ``soft_timeout_error`` (subclasses of ``TimedOut``
and ``SoftTimedOut``); the Celery layer gives Celery's ``TimeLimitExceeded`` and
``SoftTimeLimitExceeded`` that way, so a task catches what it catches under Celery.

A cancelled job (``django_wurk.cancel``) that does not stop by itself is stopped the same
way: the cancel feature cuts its deadline to the end of its grace (``Deadlines.cut``) with
``Cancelled`` as what is raised and recorded instead of ``TimedOut``.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django_wurk.core import coroutines, wire
from django_wurk.core.features.timeouts.errors import SoftTimedOut, TimedOut, for_limit
from django_wurk.core.features.timeouts.option import SOFT_TIMEOUT, TIMEOUT, absent, seconds
from django_wurk.core.wire import Payload
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.service import JobControl

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.timeouts")

#: How often the watchdog looks (seconds): a job is stopped at most this late.
TICK = 0.1
#: How long a job has, after ``TimedOut`` was raised in its thread, to return before it is
#: given up on as blocked in C code.
GRACE = 1.0


@dataclass(eq=False)
class Running:
    """One job with a limit, from the moment it starts until its thread returns."""

    thread: threading.Thread
    job: Any
    payload: Payload
    #: The hard limit and its deadline (monotonic); ``inf`` for a job with a soft limit only.
    limit: float
    deadline: float
    #: The soft limit and its deadline, if the job has one.
    soft_limit: float | None = None
    soft_deadline: float | None = None
    #: The classes raised at each deadline (the job class's ``timeout_error``...).
    error: type[TimedOut] = TimedOut
    soft_error: type[SoftTimedOut] = SoftTimedOut
    #: The soft deadline's exception was raised in the thread.
    soft_fired: bool = False
    #: Held while the watchdog acts on the job and while its thread leaves, so the two never cross.
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: When ``TimedOut`` was raised in the thread (monotonic), if it was.
    fired: float | None = None
    #: The thread returned (set under ``lock``): nothing may be done to it any more.
    left: bool = False
    #: The job was given up on: its outcome is recorded.
    abandoned: bool = False
    #: Set by a cancel (``Deadlines.cut``): raised in the thread and recorded if it is given
    #: up on, instead of ``error``.
    cancel: type[BaseException] | None = None
    #: Why it is stopped, for the log ("it was cancelled"); its timeout when empty.
    reason: str = ""
    #: Called once the job was given up on for a cancel and acknowledged (the cancel feature
    #: records it as cancelled).
    on_abandon: Callable[[], None] | None = None

    def failure(self) -> type[BaseException]:
        return self.cancel if self.cancel is not None else for_limit(self.limit, self.error)

    def why(self) -> str:
        return self.reason or f"its timeout of {self.limit:g} s"


def _raise_in(thread: threading.Thread, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in ``thread`` at its next bytecode (``None`` cancels one not raised yet)."""
    if thread.ident is None:
        return
    obj = ctypes.py_object(exc) if exc is not None else ctypes.c_void_p(0)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), obj)
    if exc is not None:
        coroutines.wake(thread)  # an async job's loop may be asleep in select()


class Deadlines:
    """The jobs of this process that run with a limit, by thread (one job per thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[threading.Thread, Running] = {}

    def enter(
        self, job: Any, payload: Payload, limit: float | None, soft_limit: float | None = None
    ) -> Running:
        thread = threading.current_thread()
        now = time.monotonic()
        hard = limit if limit is not None else float("inf")
        entry = Running(thread, job, payload, hard, now + hard, soft_limit,
                        None if soft_limit is None else now + soft_limit,
                        error_class(job, "timeout_error", TimedOut),
                        error_class(job, "soft_timeout_error", SoftTimedOut))  # fmt: skip
        with self._lock:
            self._running[thread] = entry
        return entry

    def leave(self, entry: Running) -> None:
        """The job's thread is back (returned or raised). Waits for the watchdog if it is
        acting on this job right now, then cancels a ``TimedOut`` raised too late to land."""
        with entry.lock:
            entry.left = True
            if entry.fired is not None or entry.soft_fired:
                _raise_in(entry.thread, None)
        with self._lock:
            if self._running.get(entry.thread) is entry:
                del self._running[entry.thread]

    def cut(
        self,
        thread: threading.Thread,
        job: Any,
        payload: Payload,
        within: float,
        error: type[BaseException],
        reason: str,
        on_abandon: Callable[[], None] | None = None,
    ) -> Running | None:
        """Stop the job ``thread`` runs ``within`` seconds from now with ``error`` (a cancel).

        A job already in the table (it has a timeout) gets the earlier deadline and ``error``
        (if ``TimedOut`` was already raised in it, only ``error``, for the record should it be
        given up on); any other job is entered, and that entry is returned: whoever cut it
        must ``leave`` it when the job's thread is back.
        """
        at = time.monotonic() + within
        with self._lock:
            entry = self._running.get(thread)
            if entry is None:
                entry = Running(thread, job, payload, within, at, cancel=error, reason=reason,
                                on_abandon=on_abandon)  # fmt: skip
                self._running[thread] = entry
                return entry
        with entry.lock:
            if not entry.left and not entry.abandoned:
                if entry.fired is None:
                    entry.deadline = min(entry.deadline, at)
                # Already told to stop (``TimedOut``): if it is given up on, it is recorded as
                # ``error`` all the same, never as a failure to retry.
                entry.cancel, entry.reason, entry.on_abandon = error, reason, on_abandon
        return None

    def overdue(self, now: float) -> list[Running]:
        with self._lock:
            return [e for e in self._running.values() if e.deadline <= now]

    def softly_overdue(self, now: float) -> list[Running]:
        """The jobs past their soft deadline that have not been told yet."""
        with self._lock:
            return [
                e
                for e in self._running.values()
                if e.soft_deadline is not None and e.soft_deadline <= now and not e.soft_fired
            ]

    def forget(self, entry: Running) -> None:
        with self._lock:
            if self._running.get(entry.thread) is entry:
                del self._running[entry.thread]


def error_class(job: Any, attribute: str, default: type[Any]) -> Any:
    """The job class's choice of exception for a deadline, if it is a subclass of ``default``."""
    chosen = getattr(type(job), attribute, None)
    return chosen if isinstance(chosen, type) and issubclass(chosen, default) else default


class TimeoutServerMiddleware:
    """Enters a job with a usable ``timeout`` or ``soft_timeout`` in the process's ``Deadlines``
    while it runs."""

    payload_keys = (TIMEOUT, SOFT_TIMEOUT)

    def __init__(self, wurk: Wurk, deadlines: Deadlines) -> None:
        self.wurk = wurk
        self.deadlines = deadlines

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        limit, soft = self._limit(payload, TIMEOUT), self._limit(payload, SOFT_TIMEOUT)
        if limit is None and soft is None:
            call_next()
            return
        entry = self.deadlines.enter(job, payload, limit, soft)
        try:
            call_next()
        finally:
            self.deadlines.leave(entry)

    @staticmethod
    def _limit(payload: Payload, key: str) -> float | None:
        value = payload.get(key)
        limit = seconds(value)
        if limit is None and not absent(value):
            logger.warning(
                "job %r (%s) has %s %.60r, not seconds > 0: it runs without that limit",
                payload.get("jid", ""), wire.job_display_class(payload), key, value,
            )  # fmt: skip
        return limit


class Watchdog:
    """The thread that enforces the deadlines of one worker process (see the module)."""

    def __init__(
        self, wurk: Wurk, identity: str, outage: Outage, control: JobControl, deadlines: Deadlines
    ) -> None:
        self.wurk = wurk
        self.identity = identity
        self.control = control
        self.deadlines = deadlines
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="wurk-watchdog", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5)

    def run(self) -> None:
        while not self.stopping.wait(TICK):
            try:
                self.check(time.monotonic())
            except Exception as exc:  # the watchdog must outlive any one job's trouble
                logger.exception("timeout watchdog pass failed")
                self.wurk.report_error(exc, {"context": "timeout watchdog"})

    def check(self, now: float) -> None:
        for entry in self.deadlines.softly_overdue(now):
            with entry.lock:
                if entry.left or entry.abandoned or entry.soft_fired or entry.fired is not None:
                    continue
                entry.soft_fired = True
                logger.warning(
                    "job %r (%s) passed its soft timeout of %g s: raising %s in it",
                    entry.payload.get("jid", ""), wire.job_display_class(entry.payload), entry.soft_limit,
                    entry.soft_error.__name__,
                )  # fmt: skip
                _raise_in(entry.thread, for_limit(entry.soft_limit or 0.0, entry.soft_error))
        for entry in self.deadlines.overdue(now):
            with entry.lock:
                if entry.left or entry.abandoned:
                    continue
                if entry.fired is None:
                    entry.fired = now
                    logger.warning(
                        "job %r (%s): stopping it (%s)",
                        entry.payload.get("jid", ""), wire.job_display_class(entry.payload), entry.why(),
                    )  # fmt: skip
                    _raise_in(entry.thread, entry.failure())
                elif now - entry.fired >= GRACE:
                    self.give_up(entry)

    def give_up(self, entry: Running) -> None:
        """The job did not stop (blocked in C code or a socket): fail it without its thread.

        In a swarm child the process is replaced next, which ends every job still running
        in it. Any other job already past its own timeout (stuck too, or not stopped yet)
        would then end unrecorded, and its recovery would run it again from the start: so
        each of those is failed with ``TimedOut`` as well, first. A timed-out job fails once
        and is never recovered, however many time out together.
        """
        supervised = self.control.supervised
        logger.error(
            "job %r (%s) did not stop %g s after it was told to (%s; blocked outside Python): "
            "recording its end and %s",
            entry.payload.get("jid", ""), wire.job_display_class(entry.payload), GRACE, entry.why(),
            "replacing this worker process" if supervised else "leaving its thread behind",
        )  # fmt: skip
        failure = self._abandon(entry)
        if not supervised or failure is None:
            return
        for other in self.deadlines.overdue(time.monotonic()):
            with other.lock:
                if other.left or other.abandoned:
                    continue
                logger.error(
                    "job %r (%s) is past its timeout of %g s too: recording the timeout before "
                    "the process is replaced",
                    other.payload.get("jid", ""), wire.job_display_class(other.payload), other.limit,
                )  # fmt: skip
                self._abandon(other)
        self.control.replace_process(f"a job blocked past its timeout ({failure})")

    def _abandon(self, entry: Running) -> BaseException | None:
        """Record ``TimedOut`` (or a cancel's ``Cancelled``) as ``entry``'s outcome (its lock
        held); None if its thread got back first."""
        entry.abandoned = True
        self.deadlines.forget(entry)
        failure = entry.failure()()
        replace = not self.control.supervised
        if not self.control.abandon(entry.thread, entry.job, failure, replace=replace):
            return None
        if entry.cancel is not None:
            # Cancelled: recorded as such by the cancel feature (its status, batch, Celery's
            # REVOKED), not as a failure of the job's own.
            if entry.on_abandon is not None:
                try:
                    entry.on_abandon()
                except Exception as exc:
                    logger.warning("after giving up on job %r: %s", entry.payload.get("jid", ""), exc)
            return failure
        # A job may keep records of its own (the Celery layer's result): it is told, since
        # its thread will not be back to say how it ended.
        given_up = getattr(entry.job, "given_up", None)
        if callable(given_up):
            try:
                given_up(failure)
            except Exception as exc:
                logger.exception("given_up() of job %r raised", entry.payload.get("jid", ""))
                self.wurk.report_error(exc, {"context": "timeout watchdog", "job": entry.payload})
        return failure
