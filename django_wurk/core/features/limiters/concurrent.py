"""The concurrent limiter: at most ``limit`` holders at once, cluster-wide.

Each acquisition holds a slot under a token of its own in ``lmtr-cs:<name>`` (a ZSET,
score = when the hold expires: now + ``lock_timeout`` on the server's clock), released by
that token when the block ends. A holder that died (a process killed with -9, a lost
host) never releases: its slot is reclaimed by the next acquisition after its
``lock_timeout``. So ``lock_timeout`` must be longer than the block ever runs; a block that
overruns it may see another holder take its slot (logged when it releases).

A refused call polls (25 ms, backing off to 200 ms) until ``wait_timeout``: a slot may be
released at any moment, and a poll is cheap against Redis and bounded.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from redis.exceptions import RedisError

from django_wurk.core.features.limiters import keys
from django_wurk.core.features.limiters.base import (
    _NO_HANDLE,
    Decision,
    Handle,
    Limiter,
    count_option,
    seconds_option,
)

logger = logging.getLogger("django_wurk.limiter")


class Concurrent(Limiter):
    kind: ClassVar[str] = "concurrent"
    POLLS: ClassVar[bool] = True

    def __init__(
        self, name: str, limit: int, *, wait_timeout: float = 5, lock_timeout: float = 30, **common: Any
    ) -> None:
        super().__init__(name, wait_timeout=wait_timeout, **common)
        self.limit = count_option("limit", limit)
        self.lock_timeout = seconds_option("lock_timeout", lock_timeout)

    @property
    def size(self) -> float:
        return self.limit

    def options(self) -> dict[str, Any]:
        return {"limit": self.limit, "wait_timeout": self.wait_timeout, "lock_timeout": self.lock_timeout}

    def _keys(self) -> list[str]:
        return [*super()._keys(), keys.stats(self.name)]

    def _status_args(self) -> tuple[Any, ...]:
        return (self.limit, self.lock_timeout)

    def acquire(self, token: str, first: bool = True, now: float | None = None) -> Decision:
        """Take a slot for ``token`` if one is free (no waiting)."""
        return self._decide("acquire", now, (self.limit, self.lock_timeout, token, "1" if first else "0"))

    def attempt(self, now: float | None = None) -> Decision:
        """Take a slot under a fresh token nobody releases: it frees after ``lock_timeout``.
        For tests and for filling a limiter; code that releases uses ``acquire``/``release``."""
        return self.acquire(secrets.token_hex(12), now=now)

    def release(self, token: str, held_seconds: float = 0.0) -> bool:
        """Give ``token``'s slot back; False when it was not held (any more)."""
        reply = self._run("release", None, (token, int(held_seconds * 1000)))
        return bool(reply)

    def _over_limit(self) -> None:
        # A counter for the dashboard: the caller learns of the refusal whatever happens here.
        with contextlib.suppress(RedisError):
            self.wurk.redis.hincrby(keys.stats(self.name), "overages", 1)

    @contextmanager
    def within_limit(self) -> Iterator[Handle]:
        token = secrets.token_hex(12)
        self._admit(lambda first: self.acquire(token, first))
        since = time.monotonic()
        try:
            yield _NO_HANDLE
        finally:
            held = time.monotonic() - since
            try:
                if not self.release(token, held):
                    logger.warning(
                        "limiter %r: a slot held %.1f s was reclaimed before its release "
                        "(lock_timeout %.1f s is shorter than the block ran)",
                        self.name,
                        held,
                        self.lock_timeout,
                    )
            except RedisError as exc:
                logger.warning(
                    "limiter %r: could not release a slot (%s); it frees itself after %.1f s",
                    self.name,
                    exc,
                    self.lock_timeout,
                )
