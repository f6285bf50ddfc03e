"""Rate limiters (Sidekiq Enterprise's ``Sidekiq::Limiter``): ``from django_wurk import limiter``.

```python
ERP = limiter.concurrent("erp", 50, wait_timeout=5, lock_timeout=30)

with ERP.within_limit():
    call_erp()
```

See docs/limiters.md. The code lives in the engine (``django_wurk.core.features.limiters``).
"""

from django_wurk.core.features.limiters import (
    Limiter,
    LimiterError,
    LimiterStateError,
    LimiterStatus,
    OverLimit,
    bucket,
    concurrent,
    configure,
    leaky,
    points,
    unlimited,
    window,
)

__all__ = [
    "Limiter",
    "LimiterError",
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
