"""The bucket limiter: at most ``count`` calls per calendar second, minute, hour or day.

Periods are fixed on the server's clock (UTC): ``count`` calls at 12:42:51.999 and
``count`` more at 12:42:52.000 both pass, since they fall in two buckets. The state is one
hash (``lmtr-b:<name>``: the current period's index and its count), which expires two
intervals after its last use. A refused call waits for the next period if it begins
within ``wait_timeout``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django_wurk.core.features.limiters.base import Decision, Limiter, count_option, interval_option


class Bucket(Limiter):
    kind: ClassVar[str] = "bucket"

    def __init__(
        self, name: str, count: int, interval: str, *, wait_timeout: float = 5, **common: Any
    ) -> None:
        super().__init__(name, wait_timeout=wait_timeout, **common)
        self.count = count_option("count", count)
        self.interval_name = interval
        self.interval = interval_option("interval", interval, numbers=False)

    @property
    def size(self) -> float:
        return self.count

    def options(self) -> dict[str, Any]:
        return {"count": self.count, "interval": self.interval_name, "wait_timeout": self.wait_timeout}

    def _status_args(self) -> tuple[Any, ...]:
        return (self.count, int(self.interval))

    def attempt(self, now: float | None = None) -> Decision:
        return self._decide("bucket", now, (self.count, int(self.interval)))
