"""The six constructors, with Sidekiq Enterprise's names and arguments.

Every limiter also takes ``reschedule`` (how many times a job it refuses is rescheduled
before it dies), ``backoff`` (``backoff(limiter, payload, exc)`` -> seconds until the
rescheduled job runs), ``ttl`` (seconds an unused limiter's keys live; default 90 days,
at least a day) and ``wurk`` (another engine than the global one).
"""

from __future__ import annotations

from typing import Any

from django_wurk.core.features.limiters.base import Limiter, LimiterError
from django_wurk.core.features.limiters.bucket import Bucket
from django_wurk.core.features.limiters.concurrent import Concurrent
from django_wurk.core.features.limiters.leaky import Leaky
from django_wurk.core.features.limiters.points import Points
from django_wurk.core.features.limiters.unlimited import Unlimited
from django_wurk.core.features.limiters.window import Window


def concurrent(
    name: str, limit: int, wait_timeout: float = 5, lock_timeout: float = 30, **options: Any
) -> Concurrent:
    """At most ``limit`` blocks running at once; a dead holder's slot frees after ``lock_timeout``."""
    return Concurrent(name, limit, wait_timeout=wait_timeout, lock_timeout=lock_timeout, **options)


def bucket(name: str, count: int, interval: str, wait_timeout: float = 5, **options: Any) -> Bucket:
    """At most ``count`` calls per calendar ``"second" | "minute" | "hour" | "day"``."""
    return Bucket(name, count, interval, wait_timeout=wait_timeout, **options)


def window(name: str, count: int, seconds: float | str, wait_timeout: float = 5, **options: Any) -> Window:
    """At most ``count`` calls in any sliding window of ``seconds`` (or an interval's name)."""
    return Window(name, count, seconds, wait_timeout=wait_timeout, **options)


def leaky(name: str, size: int, drain_seconds: float | str, wait_timeout: float = 5, **options: Any) -> Leaky:
    """Bursts of up to ``size``, draining fully in ``drain_seconds``: ``size / drain_seconds`` a second."""
    return Leaky(name, size, drain_seconds, wait_timeout=wait_timeout, **options)


def points(name: str, initial: float, refill_per_second: float, **options: Any) -> Points:
    """A balance of ``initial`` points refilled at ``refill_per_second``; never waits."""
    return Points(name, initial, refill_per_second, **options)


def unlimited(name: str = "unlimited", **options: Any) -> Unlimited:
    """Always admits, touches no Redis."""
    return Unlimited(name, **options)


KINDS: dict[str, type[Limiter]] = {
    cls.kind: cls for cls in (Concurrent, Bucket, Window, Leaky, Points, Unlimited)
}


def from_description(name: str, kind: str, options: Any, **common: Any) -> Limiter:
    """The limiter a stored description (``lmtr:<name>``) describes, to read its state.

    Raises ``LimiterError`` for a description no limiter could have written.
    """
    if kind not in KINDS or kind == "unlimited":
        raise LimiterError(f"unknown limiter type {kind!r}")
    if not isinstance(options, dict):
        raise LimiterError(f"options {options!r} are not an object")
    o = options
    try:
        if kind == "concurrent":
            return Concurrent(name, o["limit"], wait_timeout=o.get("wait_timeout", 5),
                              lock_timeout=o.get("lock_timeout", 30), **common)  # fmt: skip
        if kind == "bucket":
            return Bucket(name, o["count"], o["interval"], wait_timeout=o.get("wait_timeout", 5), **common)
        if kind == "window":
            return Window(name, o["count"], o["seconds"], wait_timeout=o.get("wait_timeout", 5), **common)
        if kind == "leaky":
            return Leaky(name, o["size"], o["drain"], wait_timeout=o.get("wait_timeout", 5), **common)
        return Points(name, o["initial"], o["refill"], **common)
    except KeyError as exc:
        raise LimiterError(f"options {options!r} lack {exc}") from None
