"""The window limiter: at most ``count`` calls in any ``seconds`` long sliding window.

Unlike a bucket, no boundary lets a burst of twice ``count`` through: a call is admitted
only when fewer than ``count`` were admitted in the ``seconds`` before it. The state is a
ZSET of admission times (``lmtr-w:<name>``), trimmed by each decision (never by a status
read) and expiring a second after the window. A refused call waits for the oldest call to
leave the window if that happens within ``wait_timeout``.
"""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from django_wurk.core.features.limiters.base import Decision, Limiter, count_option, interval_option


class Window(Limiter):
    kind: ClassVar[str] = "window"

    def __init__(
        self, name: str, count: int, seconds: float | str, *, wait_timeout: float = 5, **common: Any
    ) -> None:
        super().__init__(name, wait_timeout=wait_timeout, **common)
        self.count = count_option("count", count)
        self.seconds = interval_option("seconds", seconds, numbers=True)

    @property
    def size(self) -> float:
        return self.count

    def options(self) -> dict[str, Any]:
        return {"count": self.count, "seconds": self.seconds, "wait_timeout": self.wait_timeout}

    def _status_args(self) -> tuple[Any, ...]:
        return (self.count, self.seconds)

    def attempt(self, now: float | None = None) -> Decision:
        return self._decide("window", now, (self.count, self.seconds, secrets.token_hex(8)))
