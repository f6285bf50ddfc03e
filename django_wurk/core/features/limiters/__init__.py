"""Rate limiters (Sidekiq Enterprise's): cluster-wide limits on any block of code.

``concurrent``, ``bucket``, ``window``, ``leaky``, ``points`` and ``unlimited`` build a
limiter; ``with limiter.within_limit(): ...`` runs a block within it or raises
``OverLimit``. See ``docs/limiters.md``. Importing this package plugs the job-side
handling of ``OverLimit`` (reschedule with back-off) into the global engine;
``install(wurk)`` does the same for another ``Wurk``.
"""

# Imported (so installed) before this feature's middleware is prepended: theirs must sit
# inside it, to see a rate-limited job raise instead of return (see middleware.py).
from django_wurk.core.features import batches as _batches  # noqa: F401, I001
from django_wurk.core.features import unique as _unique  # noqa: F401
from django_wurk.core.engine import wurk as _wurk
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
from django_wurk.core.features.limiters.middleware import LimiterServerMiddleware, install

install(_wurk)

__all__ = [
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
    "install",
    "leaky",
    "points",
    "unlimited",
    "window",
]
