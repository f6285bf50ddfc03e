"""Riding out a Redis outage: back off, and say so once per outage, not per thread per second."""

from __future__ import annotations

import logging
import threading

from django_wurk.config import redact_url

logger = logging.getLogger("django_wurk.redis")


class Outage:
    """Shared by every loop of a process: an outage is logged once, and its end once more."""

    #: Short enough that work resumes within a couple of seconds of Redis coming back.
    MAX_BACKOFF = 2.0

    def __init__(self, redis_url: str) -> None:
        self._url = redact_url(redis_url)
        self._lock = threading.Lock()
        self._failures = 0

    @property
    def active(self) -> bool:
        return self._failures > 0

    def failed(self, exc: BaseException) -> None:
        # The first failure alone is not an outage: after a Redis restart each thread's
        # connection fails once and reconnects. Two in a row without a success is one.
        with self._lock:
            self._failures += 1
            report = self._failures == 2
        if report:
            logger.error("Redis at %s is unreachable (%s); retrying with back-off", self._url, exc)

    def recovered(self) -> None:
        if not self._failures:
            return
        with self._lock:
            was, self._failures = self._failures, 0
        if was >= 2:
            logger.warning("Redis at %s is reachable again after %d failed attempts", self._url, was)

    def backoff(self) -> float:
        return min(0.1 * 2.0 ** min(self._failures, 8), self.MAX_BACKOFF)
