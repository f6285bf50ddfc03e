"""The points limiter: a balance of ``initial`` points, refilled at ``refill`` points a second.

For APIs that charge each call by its cost (GraphQL query complexity, tokens): a call
says what it expects to spend (``within_limit(estimate=n)``) and is admitted when the
balance covers it, then reports what it really spent (``handle.points_used(actual)``),
which refunds or charges the difference; the balance may go below zero, and later calls
wait for the debt to refill. A points limiter never waits (Sidekiq Enterprise's rule):
it raises ``OverLimit`` at once, and in a job the reschedule is the wait. The state is a
hash (``lmtr-p:<name>``: balance and when it was measured).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from redis.exceptions import RedisError

from django_wurk.core.features.limiters.base import (
    Decision,
    Handle,
    Limiter,
    LimiterError,
    OverLimit,
)

logger = logging.getLogger("django_wurk.limiter")


def _amount(option: str, value: Any, *, zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LimiterError(f"{option} must be a number, not {value!r}")
    if value < 0 or (value == 0 and not zero):
        raise LimiterError(f"{option} must be {'>= 0' if zero else '> 0'}, not {value!r}")
    return float(value)


class PointsHandle(Handle):
    def __init__(self, estimate: float) -> None:
        self.estimate = estimate
        self.actual: float | None = None

    def points_used(self, points: float) -> None:
        """What the call really cost; settled against the estimate when the block ends."""
        self.actual = _amount("points", points, zero=True)


class Points(Limiter):
    kind: ClassVar[str] = "points"

    def __init__(self, name: str, initial: float, refill: float, **common: Any) -> None:
        common.pop("wait_timeout", None)  # never waits
        super().__init__(name, wait_timeout=0, **common)
        self.initial = _amount("initial", initial, zero=False)
        self.refill = _amount("refill", refill, zero=True)

    @property
    def size(self) -> float:
        return self.initial

    def options(self) -> dict[str, Any]:
        return {"initial": self.initial, "refill": self.refill}

    def _status_args(self) -> tuple[Any, ...]:
        return (self.initial, self.refill)

    def attempt(self, now: float | None = None, estimate: float = 1) -> Decision:
        return self._decide("points", now, (self.initial, self.refill, estimate))

    def settle(self, delta: float, now: float | None = None) -> None:
        """Charge ``delta`` more points (refund when negative)."""
        self._decide("points_used", now, (self.initial, self.refill, delta))

    @contextmanager
    def within_limit(self, estimate: float = 1) -> Iterator[Handle]:
        """Spend ``estimate`` points, or raise ``OverLimit`` at once when the balance is short."""
        estimate = _amount("estimate", estimate, zero=True)
        if not self.attempt(estimate=estimate).admitted:
            raise OverLimit(self)
        handle = PointsHandle(estimate)
        try:
            yield handle
        finally:
            if handle.actual is not None and handle.actual != estimate:
                try:
                    self.settle(handle.actual - estimate)
                except RedisError as exc:
                    logger.warning("limiter %r: could not settle points used (%s)", self.name, exc)
