"""The leaky bucket: bursts up to ``size``, then a steady ``size`` calls per ``drain`` seconds.

Each call pours one drop into a bucket that holds ``size`` drops and leaks continuously,
emptying completely in ``drain`` seconds (one drop every ``drain / size`` seconds). A call
that would overflow it is refused; it waits for the drop it needs to leak out if that
happens within ``wait_timeout``. So ``leaky("api", 60, "minute")`` allows a burst of 60,
then one call a second. The state is a hash (``lmtr-l:<name>``: level and when it was
measured), O(1) whatever the size.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django_wurk.core.features.limiters.base import Decision, Limiter, count_option, interval_option


class Leaky(Limiter):
    kind: ClassVar[str] = "leaky"

    def __init__(
        self, name: str, size: int, drain: float | str, *, wait_timeout: float = 5, **common: Any
    ) -> None:
        super().__init__(name, wait_timeout=wait_timeout, **common)
        self.bucket_size = count_option("size", size)
        self.drain = interval_option("drain", drain, numbers=True)

    @property
    def size(self) -> float:
        return self.bucket_size

    def options(self) -> dict[str, Any]:
        return {"size": self.bucket_size, "drain": self.drain, "wait_timeout": self.wait_timeout}

    def _status_args(self) -> tuple[Any, ...]:
        return (self.bucket_size, self.drain)

    def attempt(self, now: float | None = None) -> Decision:
        return self._decide("leaky", now, (self.bucket_size, self.drain))
