"""Every registered limiter, for the data API and the dashboard: ``LimiterSet``.

Reads only: each limiter's description (``lmtr:<name>``) and its state, through the same
read-only status step the limiter uses. Anything in those keys may be hostile (a name
that is not UTF-8 or not a limiter name, a description of another type, options that are
not JSON or describe no limiter, state of the wrong type): such a limiter is listed with
``error`` saying what is wrong, and nothing raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.limiters import keys
from django_wurk.core.features.limiters.base import Limiter, LimiterError, LimiterStateError, LimiterStatus
from django_wurk.core.features.limiters.constructors import from_description

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


@dataclass
class LimiterInfo:
    """One registered limiter as stored: what it is, its state now, or why it cannot be read."""

    name: str
    kind: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    status: LimiterStatus | None = None
    error: str | None = None
    #: The limiter itself (None when its description cannot be read): ``reset()``, ``delete()``.
    limiter: Limiter | None = None


class LimiterSet:
    """The limiters named in ``lmtr-list`` (Sidekiq Enterprise's limiter index)."""

    def __init__(self, wurk: Wurk | None = None) -> None:
        self.wurk = wurk or default_wurk

    def size(self) -> int:
        try:
            return int(self.wurk.redis.scard(keys.NAMES))
        except ResponseError:
            return 0

    def names(self, limit: int = 10_000) -> list[bytes]:
        """Up to ``limit`` names, sorted (as stored: bytes)."""
        found: list[bytes] = []
        try:
            for name in self.wurk.redis.sscan_iter(keys.NAMES, count=500):
                found.append(name)
                if len(found) >= limit:
                    break
        except ResponseError:
            return []
        return sorted(found)

    def __iter__(self) -> Iterator[LimiterInfo]:
        for name in self.names():
            yield self.info(name)

    def get(self, name: str) -> LimiterInfo | None:
        """The limiter ``name``, or None when nothing describes it."""
        info = self.info(name.encode("utf-8"))
        return None if info.error == "no description (expired)" else info

    def info(self, raw: bytes) -> LimiterInfo:
        name = raw.decode("utf-8", "replace")
        info = LimiterInfo(name=name)
        try:
            fields = self.wurk.redis.hgetall(keys.meta(raw))
        except ResponseError:
            info.error = "its description is not a hash"
            return info
        if not fields:
            info.error = "no description (expired)"
            return info
        info.kind = fields.get(b"type", b"").decode("utf-8", "replace")
        try:
            options = wire.decode_json(fields.get(b"options", b""), "limiter options")
        except wire.PayloadError as exc:
            info.error = f"unreadable options: {exc}"
            return info
        if isinstance(options, dict):
            info.options = options
        try:
            if raw != name.encode("utf-8"):
                raise LimiterError("its name is not UTF-8")
            info.limiter = from_description(name, info.kind, options, wurk=self.wurk)
        except LimiterError as exc:
            info.error = str(exc)
            return info
        try:
            info.status = info.limiter.status()
        except LimiterStateError as exc:
            info.error = str(exc)
        return info
