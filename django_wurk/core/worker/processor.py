"""A processor is one job thread: fetch a job, run it, record the outcome, repeat.

Everything that can go wrong with data in Redis is handled here without killing the
thread: an undecodable payload is buried with a reason, an unknown class fails and
retries, a failure whose retry cannot be written is buried with its original bytes, and a
Redis outage makes the thread back off instead of spinning.

It knows no feature. A job that ends in a feature's own way reaches it only through the
engine's words for that (``core/control.py``): ``PutBack`` (an iterable job interrupted by
the stop goes back to its queue), ``Cancelled`` (the job was cancelled: acknowledged, not
failed), ``stopping()`` (what such a job asks), and the process's
``JobControl.abandon`` (a timeout's watchdog gives up on a stuck job, and this thread,
back too late, finds it ``Abandoned``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core import coroutines, wire
from django_wurk.core.control import Cancelled, PutBack, WorkerSignal, contain, watch_stop
from django_wurk.core.dead_set import bury, invalid_payload_envelope
from django_wurk.core.engine import Execution
from django_wurk.core.worker.fetch import Fetch, UnitOfWork
from django_wurk.core.worker.joblog import JobLog
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.retry import RetryHandler
from django_wurk.core.worker.stats import Stats
from django_wurk.core.worker.work import Work, WorkSet

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.processor")
job_logger = logging.getLogger("django_wurk.job")

#: How long a thread on its way out waits through an outage to acknowledge its last job.
ACKNOWLEDGE_WITHIN = 10.0


class Shutdown(WorkerSignal):
    """Raised inside a job thread at hard shutdown; the job has been pushed back, not failed."""


class Abandoned(WorkerSignal):
    """This thread's job was given up on while it ran (``Manager.abandon``): its outcome is
    recorded and another thread has taken this one's place, so this one only ends."""


def thread_id() -> str:
    """A short per-thread id for the busy-work hash, like Sidekiq's base-36 tid."""
    n = threading.get_ident() ^ os.getpid()
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


class Processor:
    """One job thread. Its collaborators are given to it; it tells its owner two events.

    ``quieting`` is the manager's "stop fetching" flag, ``work`` the set of running jobs it
    shares with the heartbeat and the manager's stop. ``on_died`` is called when the thread
    ends on an unexpected error (the manager starts another in its place); ``on_fetch_lost``
    after a fetch failed and Redis answers again (the manager pushes back a job that fetch
    may have moved into the private list; False means "not decided yet, ask again").
    """

    def __init__(
        self,
        wurk: Wurk,
        index: int,
        *,
        fetch: Fetch,
        retry: RetryHandler,
        stats: Stats,
        outage: Outage,
        work: WorkSet,
        quieting: threading.Event,
        on_died: Callable[[Processor], None],
        on_fetch_lost: Callable[[], bool],
        stopping: threading.Event | None = None,
    ) -> None:
        self.wurk = wurk
        self.index = index
        self.fetch = fetch
        self.retry = retry
        self.stats = stats
        self.outage = outage
        self.work = work
        self.quieting = quieting
        self.on_died = on_died
        self.on_fetch_lost = on_fetch_lost
        #: Set by the manager when the stop begins; a job reads it through ``stopping()``.
        self.stopping = stopping if stopping is not None else threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"wurk-processor-{index}", daemon=True)
        # Read by Manager.reclaim_strays from another thread, which waits for a fetch under way
        # to end: the jobs it moves are held (``ReliableFetch.held``) before it is over.
        #: Fetch calls ended, successful or not, and whether one is under way.
        self.fetches = 0
        self.fetching = False
        self.joblog = JobLog(job_logger)
        #: Its thread was started (a processor made only to record outcomes never is).
        self.started = False
        #: Given up on (``Manager.abandon``): another thread has taken its place.
        self.retired = False

    def start(self) -> None:
        self.started = True
        self.thread.start()

    def run(self) -> None:
        self.tid = thread_id()
        watch_stop(self.stopping)
        # The finished job to hand to the next fetch, whose acknowledgement rides on a later
        # round trip (reliable fetch). The fetch keeps it from then on, even if it fails.
        pending: UnitOfWork | None = None
        # Set when a fetch failed: the server may have run it (moved a job into our private
        # list) before the connection died, e.g. when Redis is stopped between a command and
        # its reply. Nobody else takes jobs from a live worker, so we look for it ourselves.
        stray_check = False
        abandoned = False
        try:
            while not self.quieting.is_set():
                try:
                    if stray_check:
                        stray_check = not self.on_fetch_lost()
                    self.fetching = True
                    handed, pending = pending, None
                    unit = self.fetch.fetch(handed, self.index)
                except RedisError as exc:
                    self._fetch_ended()
                    stray_check = True
                    self.outage.failed(exc)
                    self.quieting.wait(self.outage.backoff())
                    continue
                self._fetch_ended()
                self.outage.recovered()
                if unit is not None and self.process(unit):
                    pending = unit
                # else an outcome not recorded: the job stays in the private list, and the
                # next fetch no longer holds it
        except Shutdown:
            pass
        except Abandoned:
            # Its job was settled for it and its share of the fetch retired (``Manager.abandon``):
            # anything it acknowledged or pushed back now could be another thread's.
            abandoned = True
        except BaseException as exc:
            # Nothing above should raise (a job's own exit is its failure, see ``_process``); if
            # anything does, say so loudly and let the manager replace us.
            logger.critical("processor thread %s died: %s", self.thread.name, exc, exc_info=True)
            self.wurk.report_error(contain(exc), {"context": "processor thread"})
            self.on_died(self)
        finally:
            if not abandoned:
                self._acknowledge(pending)  # and every finished job handed to the fetch before
                self.fetch.release()
            coroutines.close_thread_loop()

    def _fetch_ended(self) -> None:
        self.fetches += 1
        self.fetching = False

    def _acknowledge(self, unit: UnitOfWork | None) -> None:
        """Acknowledge the finished jobs on the way out, riding out a short Redis outage."""

        def give_up(exc: RedisError) -> None:
            logger.error("could not acknowledge a finished job (%s); it may run again", exc)

        self.outage.ride_out(
            lambda: self.fetch.acknowledge(unit), time.monotonic() + ACKNOWLEDGE_WITHIN, give_up
        )

    def process(self, unit: UnitOfWork) -> bool:
        """Run one job; True once its outcome is recorded (so it can be acknowledged)."""
        work = self.work.start(self.tid, unit, self.thread)
        try:
            done = self._process(unit, work)
            self.work.done(self.tid, work)
        except BaseException:  # Shutdown, Abandoned, or a bug: the job is not running any more either way
            self.work.end(self.tid)
            raise
        return done

    def _settle(self, work: Work) -> None:
        """Back from the job: stop here if it was abandoned meanwhile (see ``Abandoned``)."""
        if not self.work.settle(work):
            raise Abandoned  # its failure was recorded and acknowledged for it

    def record_failure(self, unit: UnitOfWork, job: object, exc: BaseException) -> bool:
        """Hand a failed job to the retry handler (retry set, dead set or discard)."""
        return self._record_outcome(
            functools.partial(self.retry.handle, unit.raw, unit.queue, job, exc), unit, exc
        )

    def _process(self, unit: UnitOfWork, work: Work) -> bool:
        wurk = self.wurk
        try:
            payload = wire.loads(unit.raw)
        except wire.PayloadError as error:
            logger.error("burying an unreadable job from queue %r: %s", unit.queue, error)
            envelope = invalid_payload_envelope(unit.queue, unit.raw, error, wurk.config.timestamps)
            buried = self._record_outcome(functools.partial(bury, wurk, envelope), unit)
            if buried:  # a death like any other: the death handlers hear it (with the envelope)
                wurk.report_death(wire.loads(envelope), error)
            return buried

        job_class_name = wire.job_display_class(payload)
        jid = payload.get("jid", "")
        joblog = self.joblog
        log = joblog.enabled()
        if log:
            context = {"jid": jid, "job_class": job_class_name, "queue": unit.queue}
            joblog.line("start", (), context)
        execution = Execution(wurk, payload, contain_exits=True)
        started = time.monotonic()
        try:
            execution.run()
        except PutBack as put_back:
            self._settle(work)  # an abandoned job's thread pushes nothing back either
            if log:
                where = "behind the jobs waiting" if put_back.behind else "at the head of its queue"
                joblog.line("put back %s: runs again from there", (where,), context)
            return self._put_back(unit, put_back.behind)
        except Cancelled:
            # Its outcome: done with, never retried (``core/control.py``); the middleware it
            # passed out through recorded it. Acknowledged like a success, counted as neither.
            self._settle(work)
            if log:
                joblog.line("cancelled", (), context)
            return True
        except WorkerSignal:
            raise
        except BaseException as raised:
            # Anything else is the job's failure, ``sys.exit()`` from a middleware too: the thread
            # lives on to record it and fetch the next job (``core/control.py``).
            exc = contain(raised)
            if exc is not raised:
                exc.__cause__ = raised
            self._settle(work)
            elapsed = (time.monotonic() - started) * 1000
            self.stats.record(job_class_name, elapsed, True, time.time())
            if log:
                # The start line's record has its own copy of ``context``: adding to it is safe.
                context["duration"] = round(elapsed / 1000, 6)
                context["outcome"] = "fail"
                joblog.line("fail: %.3f sec (%s: %s)", (elapsed / 1000, type(exc).__name__, exc), context)
            wurk.report_error(exc, {"context": "Job raised exception", "job": payload, "queue": unit.queue})
            return self.record_failure(unit, execution.job, exc)
        self._settle(work)
        elapsed = (time.monotonic() - started) * 1000
        self.stats.record(job_class_name, elapsed, False, time.time())
        if log:
            context["duration"] = round(elapsed / 1000, 6)
            context["outcome"] = "done"
            joblog.line("done: %.3f sec", (elapsed / 1000,), context)
        return True

    def _put_back(self, unit: UnitOfWork, behind: bool = False) -> bool:
        """Put a job that raised ``PutBack`` back in its queue; always False (no ack).

        At the head (fetched next), or ``behind`` the jobs waiting (``PutBack.behind``).

        With reliable fetch the move out of the private list is atomic; if Redis is down the
        job stays there and the stop's sweep pushes it back. With basic fetch the payload goes
        to the log at CRITICAL if it cannot be pushed, as at any shutdown.
        """

        def give_up(exc: RedisError) -> bool:
            logger.critical(
                "could not put a job back to queue %r (%s); its payload: %r",
                unit.queue,
                exc,
                unit.raw,
            )
            return False

        def push() -> bool:
            self.fetch.push_back([unit], behind=behind)
            return False

        return self.outage.ride_out(push, time.monotonic() + max(self.wurk.config.timeout, 5.0), give_up)

    def _record_outcome(
        self, write: Callable[[], object], unit: UnitOfWork, failure: BaseException | None = None
    ) -> bool:
        """Write a retry/dead entry, riding out a Redis outage rather than dropping the job.

        False if Redis stayed down: the job is then not acknowledged, so with reliable fetch
        it stays in the private list and is pushed back at shutdown.

        Any other error means the entry cannot be written at all (a value JSON cannot carry,
        a field no rule can read): retrying would fail the same way, and leaving the job
        unacknowledged would run it again at every restart. So the job goes to the dead set
        instead, as the bytes it was fetched as, with ``failure`` and the error as reason.
        """
        wurk = self.wurk
        deadline = time.monotonic() + max(wurk.config.timeout, 5.0) * 4

        def give_up(exc: RedisError) -> bool:
            logger.critical(
                "could not record a failed job in Redis (%s); its payload from queue %r follows: %r",
                exc,
                unit.queue,
                unit.raw,
            )
            return False

        def record(write: Callable[[], object]) -> bool:
            def attempt() -> bool:
                write()
                return True

            return self.outage.ride_out(attempt, deadline, give_up)

        try:
            return record(write)
        except Exception as exc:
            error = unrecordable(failure, exc)
            logger.error("burying a job from queue %r as fetched: %s", unit.queue, error)
            wurk.report_error(exc, {"context": "recording a job's outcome", "queue": unit.queue})
        envelope = invalid_payload_envelope(unit.queue, unit.raw, error, wurk.config.timestamps)
        try:
            return record(functools.partial(bury, wurk, envelope))
        except Exception as exc:  # not even the envelope could be written: say so, keep the job
            logger.critical(
                "could not bury a job whose outcome cannot be recorded (%s); "
                "its payload from queue %r follows: %r",
                exc,
                unit.queue,
                unit.raw,
            )
            return False


def unrecordable(failure: BaseException | None, exc: BaseException) -> wire.PayloadError:
    """The dead-set reason for a job whose outcome could not be written."""
    why = f"{type(exc).__name__}: {wire.error_message(exc)}"
    if failure is None:
        return wire.PayloadError("InvalidPayload", f"its outcome could not be recorded ({why})")
    return wire.PayloadError(
        "InvalidPayload",
        f"the job failed ({type(failure).__name__}: {wire.error_message(failure)}) and its retry "
        f"could not be recorded ({why}); it is kept here as it was fetched",
    )
