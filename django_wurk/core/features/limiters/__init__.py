"""Rate limiters (Sidekiq Enterprise's): cluster-wide limits on any block of code.

``concurrent``, ``bucket``, ``window``, ``leaky``, ``points`` and ``unlimited`` build a
limiter; ``with limiter.within_limit(): ...`` runs a block within it or raises
``OverLimit``. See ``docs/limiters.md``. ``FEATURE`` plugs in the job-side handling of
``OverLimit``: the job is rescheduled with back-off.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.limiters.base import (
    Handle,
    Limiter,
    LimiterError,
    LimiterStateError,
    LimiterStatus,
    OverLimit,
    configure,
)
from django_wurk.core.features.limiters.constructors import (
    bucket,
    concurrent,
    leaky,
    points,
    unlimited,
    window,
)
from django_wurk.core.features.limiters.listing import LimiterInfo, LimiterSet
from django_wurk.core.features.limiters.middleware import LimiterServerMiddleware, plug

FEATURE = Feature(
    "limiters",
    plug,
    # Outside the features that must see a rate-limited job raise, never return: the unique
    # lock is kept, the batch does not count a success, status does not say "succeeded".
    server_place=Place(outside=("unique", "batches", "status")),
)

__all__ = [
    "FEATURE",
    "Handle",
    "Limiter",
    "LimiterError",
    "LimiterInfo",
    "LimiterServerMiddleware",
    "LimiterSet",
    "LimiterStateError",
    "LimiterStatus",
    "OverLimit",
    "bucket",
    "concurrent",
    "configure",
    "leaky",
    "points",
    "unlimited",
    "window",
]
