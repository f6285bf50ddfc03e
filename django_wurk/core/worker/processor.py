"""A processor is one job thread: fetch a job, run it, record the outcome, repeat.

Everything that can go wrong with data in Redis is handled here without killing the
thread: an undecodable payload is buried with a reason, an unknown class fails and
retries, a failure whose retry cannot be written is buried with its original bytes, and a
Redis outage makes the thread back off instead of spinning.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from django_wurk.core import coroutines, wire
from django_wurk.core.engine import Execution
from django_wurk.core.worker.fetch import UnitOfWork
from django_wurk.core.worker.retry import bury

if TYPE_CHECKING:
    from django_wurk.core.worker.manager import Manager

logger = logging.getLogger("django_wurk.processor")
job_logger = logging.getLogger("django_wurk.job")

#: The class name an undecodable payload is filed under in the dead set.
INVALID_PAYLOAD_CLASS = "django_wurk.InvalidPayload"


class Shutdown(BaseException):
    """Raised inside a job thread at hard shutdown; the job has been pushed back, not failed."""


def thread_id() -> str:
    """A short per-thread id for the busy-work hash, like Sidekiq's base-36 tid."""
    n = threading.get_ident() ^ os.getpid()
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


@dataclass
class Work:
    """A job being run, as the heartbeat reports it."""

    unit: UnitOfWork
    thread: threading.Thread
    run_at: int = field(default_factory=lambda: int(time.time()))
    finished: bool = False
    abandoned: bool = False


def invalid_payload_envelope(unit: UnitOfWork, error: wire.PayloadError, style: wire.TimestampStyle) -> str:
    """Wrap a payload we cannot run so the dead set says why and keeps every byte of it.

    The original text is the single argument (base64 when it is not UTF-8). ``retry: 0``
    means a "Retry" from a dashboard sends it straight back to the dead set rather than
    discarding it.
    """
    now = wire.now_stamp(style)
    envelope: dict[str, Any] = {"retry": 0, "queue": unit.queue, "class": INVALID_PAYLOAD_CLASS}
    try:
        envelope["args"] = [unit.raw.decode("utf-8")]
    except UnicodeDecodeError:
        import base64

        envelope["args"] = []
        envelope["payload_base64"] = base64.b64encode(unit.raw).decode("ascii")
    envelope.update(
        jid=wire.new_jid(),
        created_at=now,
        enqueued_at=now,
        error_message=str(error),
        error_class=error.error_class,
        failed_at=now,
        retry_count=0,
    )
    return wire.dumps(envelope)


class Processor:
    def __init__(self, manager: Manager, index: int) -> None:
        self.manager = manager
        self.index = index
        self.wurk = manager.wurk
        self.thread = threading.Thread(target=self.run, name=f"wurk-processor-{index}", daemon=True)
        # Read by Manager.reclaim_strays from another thread; written in this order (holding,
        # then fetches, then fetching) so a job a fetch moved is held before the fetch is over.
        #: The job this thread fetched and has not acknowledged: running, or finished and
        #: waiting for the acknowledgement that rides on the next fetch.
        self.holding: UnitOfWork | None = None
        #: Fetch calls ended, successful or not, and whether one is under way.
        self.fetches = 0
        self.fetching = False

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        manager = self.manager
        self.tid = thread_id()
        # The finished job whose acknowledgement rides on the next fetch (reliable fetch).
        pending: UnitOfWork | None = None
        # Set when a fetch failed: the server may have run it (moved a job into our private
        # list) before the connection died, e.g. when Redis is stopped between a command and
        # its reply. Nobody else takes jobs from a live worker, so we look for it ourselves.
        stray_check = False
        try:
            while not manager.quieting.is_set():
                try:
                    if stray_check:
                        stray_check = not manager.reclaim_strays()
                    self.fetching = True
                    unit = manager.fetch.fetch(pending, self.index)
                except RedisError as exc:
                    self._fetch_ended(pending)
                    stray_check = True
                    manager.outage.failed(exc)
                    manager.quieting.wait(manager.outage.backoff())
                    continue
                self._fetch_ended(unit)
                pending = None
                manager.outage.recovered()
                if unit is not None and self.process(unit):
                    pending = unit
                else:
                    self.holding = None  # an outcome not recorded stays in the private list, unheld
        except Shutdown:
            pass
        except Exception as exc:
            # Nothing above should raise; if it does, say so loudly and let the manager replace us.
            logger.exception("processor thread crashed")
            self.wurk.report_error(exc, {"context": "processor thread"})
            manager.processor_died(self)
        finally:
            if pending is not None:
                self._acknowledge(pending)
            manager.fetch.release()
            coroutines.close_thread_loop()

    def _fetch_ended(self, holding: UnitOfWork | None) -> None:
        self.holding = holding
        self.fetches += 1
        self.fetching = False

    def _acknowledge(self, unit: UnitOfWork) -> None:
        """Acknowledge a finished job on the way out, riding out a short Redis outage."""
        deadline = time.monotonic() + 10.0
        while True:
            try:
                self.manager.fetch.acknowledge(unit)
                return
            except RedisError as exc:
                self.manager.outage.failed(exc)
                if time.monotonic() > deadline:
                    logger.error("could not acknowledge a finished job (%s); it may run again", exc)
                    return
                time.sleep(self.manager.outage.backoff())

    def process(self, unit: UnitOfWork) -> bool:
        """Run one job; True once its outcome is recorded (so it can be acknowledged)."""
        manager = self.manager
        work = Work(unit, self.thread)
        with manager.lock:
            manager.busy[self.tid] = work
        try:
            done = self._process(unit)
            with manager.lock:
                work.finished = True
            return done
        finally:
            with manager.lock:
                manager.busy.pop(self.tid, None)

    def _process(self, unit: UnitOfWork) -> bool:
        wurk = self.wurk
        try:
            payload = wire.loads(unit.raw)
        except wire.PayloadError as error:
            logger.error("burying an unreadable job from queue %r: %s", unit.queue, error)
            return self._record_outcome(
                functools.partial(bury, wurk, invalid_payload_envelope(unit, error, wurk.config.timestamps)),
                unit,
            )

        job_class_name = wire.job_display_class(payload)
        jid = payload.get("jid", "")
        log = job_logger.isEnabledFor(logging.INFO)
        if log:
            job_logger.info("start", extra={"jid": jid, "job_class": job_class_name, "queue": unit.queue})
        execution = Execution(wurk, payload)
        started = time.monotonic()
        try:
            execution.run()
        except Shutdown:
            raise
        except Exception as exc:
            elapsed = (time.monotonic() - started) * 1000
            manager = self.manager
            manager.stats.record(job_class_name, elapsed, True, time.time())
            if log:
                job_logger.info(
                    "fail: %.3f sec (%s: %s)",
                    elapsed / 1000,
                    type(exc).__name__,
                    exc,
                    extra={"jid": jid, "job_class": job_class_name, "queue": unit.queue},
                )
            wurk.report_error(exc, {"context": "Job raised exception", "job": payload, "queue": unit.queue})
            return self._record_outcome(
                functools.partial(manager.retry.handle, unit.raw, unit.queue, execution.job, exc), unit, exc
            )
        elapsed = (time.monotonic() - started) * 1000
        self.manager.stats.record(job_class_name, elapsed, False, time.time())
        if log:
            job_logger.info(
                "done: %.3f sec",
                elapsed / 1000,
                extra={"jid": jid, "job_class": job_class_name, "queue": unit.queue},
            )
        return True

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
        manager = self.manager
        deadline = time.monotonic() + max(manager.wurk.config.timeout, 5.0) * 4
        fallen_back = False
        while True:
            try:
                write()
                manager.outage.recovered()
                return True
            except RedisError as exc:
                manager.outage.failed(exc)
                if time.monotonic() > deadline:
                    logger.critical(
                        "could not record a failed job in Redis (%s); its payload from queue %r follows: %r",
                        exc,
                        unit.queue,
                        unit.raw,
                    )
                    return False
                time.sleep(manager.outage.backoff())
            except Exception as exc:
                if fallen_back:  # not even the envelope could be written: say so, keep the job
                    logger.critical(
                        "could not bury a job whose outcome cannot be recorded (%s); "
                        "its payload from queue %r follows: %r",
                        exc,
                        unit.queue,
                        unit.raw,
                    )
                    return False
                fallen_back = True
                error = unrecordable(failure, exc)
                logger.error("burying a job from queue %r as fetched: %s", unit.queue, error)
                self.wurk.report_error(exc, {"context": "recording a job's outcome", "queue": unit.queue})
                envelope = invalid_payload_envelope(unit, error, self.wurk.config.timestamps)
                write = functools.partial(bury, self.wurk, envelope)


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
