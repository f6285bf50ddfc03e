"""The cancel feature's server middleware: a cancelled job never starts, and ends cancelled.

* At the start: a job cancelled is not run; ``Cancelled`` is raised instead. The check reads
  the recent cancels this process knows (``flag.Recent``, read every ``LOOK_EVERY``), and
  the flag itself for a job recovered from a dead worker's list: a job cancelled while it sat
  in a worker's memory starts only if its start came within ``LOOK_EVERY`` of the cancel,
  and is then a running job cancelled (below).
* While it runs: the job is in this process's ``RunningJobs`` (the watcher looks up their
  flags) and its ``current_job()`` handle answers ``cancelled``.
* At the end: a job that saw ``cancelled`` and returned ended ``Cancelled``; a job that
  raised while it is cancelled ended ``Cancelled`` too (a cancelled job is never retried:
  the error is most likely the cancel's own, raised in it after the grace).

Each ``Cancelled`` passing out is counted once (``stat:cancelled``). Its place: inside
status, unique, batches and Celery's revoked record, which record the outcome as the job's
(cancelled, lock released, counted for the batch, REVOKED); outside expiring, timeouts and
encryption, so a cancelled job is neither counted expired nor has its argument opened.

A job class that says ``cancels_itself`` (iterable jobs) is let through untouched: it reads
the same flag itself and ends the way Sidekiq's iterable jobs do (its cancel hooks, then done).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from django_wurk.core.client import writes_to_redis
from django_wurk.core.config import ConfigError
from django_wurk.core.control import Cancelled, WorkerSignal
from django_wurk.core.features.cancel import current, flag
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.cancel")

#: Set while a job removed by ``cancel`` is recorded through the chain (``finder.settle``):
#: the middleware then ends it without reading the flag, so the job can never run there.
settling: contextvars.ContextVar[bool] = contextvars.ContextVar("wurk_cancel_settling", default=False)


class Entry:
    """One job running in this process, from its start check to its thread's return.

    Its state changes under its ``RunningJobs``' one lock (a job start is the hot path: no
    lock of its own is made per job)."""

    __slots__ = ("cut", "handle", "jid", "job", "left", "noticed", "payload", "settled", "thread")

    def __init__(
        self, jid: str, thread: threading.Thread, job: Any, payload: Payload, handle: current.CurrentJob
    ) -> None:
        self.jid = jid
        self.thread = thread
        self.job = job
        self.payload = payload
        self.handle = handle
        #: The watcher saw the flag (monotonic time), once.
        self.noticed: float | None = None
        #: The timeouts' deadline entry this job was given when its grace was cut (``Deadlines.cut``).
        self.cut: Any = None
        #: Its thread is back: nothing more may be done to it.
        self.left = False
        #: Given up on (blocked past its grace) and recorded for it: if its thread ever comes
        #: back, it is not counted again.
        self.settled = False


class RunningJobs:
    """The jobs of this process, by thread (one job per thread), for the watcher."""

    def __init__(self) -> None:
        #: Guards the table and every entry's state.
        self.lock = threading.Lock()
        self._entries: dict[threading.Thread, Entry] = {}

    def enter(self, entry: Entry) -> None:
        with self.lock:
            self._entries[entry.thread] = entry

    def leave(self, entry: Entry, deadlines: Callable[[], Any]) -> None:
        """``deadlines`` gives the timeouts' table; asked only for a job whose grace was cut
        (a job's end is the hot path)."""
        with self.lock:
            entry.left = True
            cut, entry.cut = entry.cut, None
            if self._entries.get(entry.thread) is entry:
                del self._entries[entry.thread]
        if cut is not None:
            table = deadlines()
            if table is not None:
                table.leave(cut)

    def snapshot(self) -> list[Entry]:
        with self.lock:
            return list(self._entries.values())


class CancelServerMiddleware:
    """See the module."""

    def __init__(
        self, wurk: Wurk, running: RunningJobs, deadlines: Callable[[], Any], recent: flag.Recent
    ) -> None:
        self.wurk = wurk
        self.running = running
        self.recent = recent
        #: The timeouts' ``Deadlines`` of this engine, or None (asked when needed).
        self.deadlines = deadlines

    def _call(self, *command: Any) -> Any:
        """One command on this thread's own connection (``Line.call``): the cheapest round trip."""
        return self.wurk.lines.get().call(*command)

    def _cancelled(self, jid: str, call: Callable[..., Any] | None = None) -> bool:
        try:
            return flag.read(call or self.wurk.lines.get().call, jid)
        except ConfigError:  # no Redis configured (an inline run): nothing can have cancelled it
            return False
        except (RedisError, OSError) as exc:
            # Not known to be cancelled: the job runs (the worker needs Redis to record it
            # anyway), rather than failing and retrying for a flag it may not have.
            logger.warning("job %r: could not read its cancel flag (%s); running it", jid, exc)
            return False

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        jid = payload.get("jid")
        if settling.get():
            self._end(jid)
            raise Cancelled("cancelled before it ran")
        if (
            not isinstance(jid, str)
            or not jid
            or not writes_to_redis(self.wurk)
            or getattr(job, "cancels_itself", False)  # iterable jobs: their own cancel, Sidekiq's way
        ):
            call_next()
            return
        call = self._call  # this thread's own connection, looked up only when a job asks
        # The recent cancels as this process last read them (``flag.Recent``), and the flag
        # itself only for a job recovered from a dead process (rare, and maybe cancelled
        # long before this process started).
        if jid in self.recent or (payload.get("recovered") and self._cancelled(jid, call)):
            logger.info("job %r (%s) is cancelled: not running it", jid, payload.get("class"))
            self._end(jid)
            raise Cancelled("cancelled before it ran")
        handle = current.CurrentJob(call, jid)
        entry = Entry(jid, threading.current_thread(), job, payload, handle)
        self.running.enter(entry)
        previous = current.enter(handle)
        try:
            call_next()
        except Cancelled:
            if not entry.settled:
                self._end(jid)
            raise
        except WorkerSignal:
            raise  # the worker's own (shutdown, put back): not an outcome of the job
        except BaseException as exc:
            if not (entry.noticed is not None or handle.seen or self._cancelled(jid, call)):
                raise
            if not entry.settled:
                self._end(jid)
            raise Cancelled(f"cancelled while it ran (it raised {type(exc).__name__})") from exc
        finally:
            current.leave(previous)
            self.running.leave(entry, self.deadlines)
        if handle.seen:
            self._end(jid)
            raise Cancelled("cancelled while it ran; it stopped")

    def _end(self, jid: Any) -> None:
        try:
            redis = self.wurk.redis
        except ConfigError:
            return
        flag.count(redis, jid if isinstance(jid, str) else None)
