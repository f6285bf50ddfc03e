"""Riding out a Redis outage: back off, and say so once per outage, not per thread per second."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import RedisError

from django_wurk.core.backlog import ride_out
from django_wurk.core.config import redact_url
from django_wurk.core.worker.preflight import incurable

logger = logging.getLogger("django_wurk.redis")

T = TypeVar("T")


class Outage:
    """Shared by every loop of a process: an outage is logged once, and its end once more.

    A failure counts towards an outage only as part of one thread's streak. After Redis
    restarts, every thread's connection to the old server fails once and then reconnects;
    counted process-wide those single failures looked like a second outage right after the
    first one ended. Two failures in a row in the same thread are one.
    """

    #: Short enough that work resumes within a couple of seconds of Redis coming back.
    MAX_BACKOFF = 2.0

    def __init__(self, redis_url: str) -> None:
        self._url = redact_url(redis_url)
        self._lock = threading.Lock()
        self._local = threading.local()
        #: Threads whose last call failed; zero keeps ``recovered`` (called per job) at one read.
        self._failing_threads = 0
        #: Failed attempts, all threads together, since the outage was reported.
        self._failures = 0
        self._reported = False
        #: Called with each failed Redis round trip (a metrics counter); must not raise.
        self.listeners: list[Callable[[BaseException], None]] = []

    def _streak(self) -> int:
        streak: int = getattr(self._local, "streak", 0)
        return streak

    def failed(self, exc: BaseException) -> None:
        for listener in self.listeners:
            listener(exc)
        streak = self._streak() + 1
        self._local.streak = streak
        with self._lock:
            if streak == 1:
                self._failing_threads += 1
            self._failures += 1
            report = streak >= 2 and not self._reported
            if report:
                self._reported = True
        if report:
            why = incurable(exc)
            if why is None:
                logger.error("Redis at %s is unreachable (%s); retrying with back-off", self._url, exc)
            else:  # after the start (which such an answer stops): say what to fix, not "unreachable"
                logger.error("Redis at %s refuses this worker: %s; retrying with back-off", self._url, why)

    def recovered(self) -> None:
        if not self._failing_threads:  # and so nothing reported: a reported outage has a failing thread
            return
        with self._lock:
            if self._streak():
                self._local.streak = 0
                self._failing_threads -= 1
            if not self._reported:
                if not self._failing_threads:
                    self._failures = 0
                return
            self._reported = False
            was, self._failures = self._failures, 0
        logger.warning("Redis at %s is reachable again after %d failed attempts", self._url, was)

    def backoff(self) -> float:
        return min(0.1 * 2.0 ** min(self._streak(), 8), self.MAX_BACKOFF)

    def ride_out(self, action: Callable[[], T], deadline: float, on_give_up: Callable[[RedisError], T]) -> T:
        """``action()``, tried again with back-off while Redis is unreachable, until ``deadline``.

        For the writes a worker must not drop (acknowledging a finished job, recording a
        failure, pushing unfinished jobs back at stop): they wait out a short outage where
        the loops would simply try again on their next pass. ``deadline`` is a
        ``time.monotonic()`` time; once an attempt fails after it, ``on_give_up`` is given
        the last error and its result returned, so the caller says what is lost and where
        (the log, at CRITICAL, is the last place a job's payload can be kept). Any other
        exception is not an outage and is raised at once: trying again would fail the same way.

        The loop is ``core.backlog.ride_out``'s, with this outage's back-off and reports.
        Only a success after a failure here ends this thread's part in an outage: one at the
        first try proves nothing when ``action`` had nothing to send (a thread acknowledging
        no job on its way out of an outage logged "reachable again" while Redis was down).
        """

        def give_up(exc: BaseException) -> T:
            assert isinstance(exc, RedisError)  # the only transient error here
            return on_give_up(exc)

        return ride_out(
            action,
            deadline,
            give_up,
            transient=(RedisError,),
            pause=lambda failures: self.backoff(),
            failed=self.failed,
            recovered=self.recovered,
        )
