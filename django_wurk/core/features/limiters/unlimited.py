"""The unlimited limiter: always admits, touches no Redis.

For code that picks its limiter at run time (a customer on a plan without limits, a
feature flag, a test) and wants to keep one ``with limiter.within_limit():`` shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from django_wurk.core.features.limiters.base import _NO_HANDLE, Decision, Handle, Limiter, LimiterStatus


class Unlimited(Limiter):
    kind: ClassVar[str] = "unlimited"

    def __init__(self, name: str = "unlimited", **common: Any) -> None:
        super().__init__(name, wait_timeout=0, **common)

    @property
    def size(self) -> float:
        return math_inf

    def options(self) -> dict[str, Any]:
        return {}

    def attempt(self, now: float | None = None) -> Decision:
        return Decision(True, None)

    @contextmanager
    def within_limit(self) -> Iterator[Handle]:
        yield _NO_HANDLE

    def status(self, now: float | None = None) -> LimiterStatus:
        return LimiterStatus(used=0, limit=None, reset_at=None)

    def reset(self) -> None:
        pass

    def delete(self) -> None:
        pass


math_inf = float("inf")
