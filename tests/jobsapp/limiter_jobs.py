"""Rate-limited jobs the tests run in real workers (imported by the app, so ``runwurk``
subprocesses know them too). They measure, in Redis, what the limit let through."""

from __future__ import annotations

import time

from django_wurk import job, limiter, wurk

#: Two at once across every process and thread; long waits, so every job gets through.
GATE = limiter.concurrent("test-gate", 2, wait_timeout=60, lock_timeout=30)


@job(queue="limits", retry=0)
def gated(n: int) -> None:
    """Counts who is inside the limit at once; ``ZADD GT`` keeps the most ever seen."""
    with GATE.within_limit():
        redis = wurk.redis
        inside = redis.incr("gate:inside")
        redis.zadd("gate:max", {"max": inside}, gt=True)
        time.sleep(0.05)
        redis.decr("gate:inside")
    wurk.redis.rpush("gate:done", n)


@job(retry=5)
def never_admitted(n: int) -> None:
    """Refused every time: a window of one call a day, used up by the test beforehand."""
    with limiter.window("test-full", 1, 86_400, wait_timeout=0).within_limit():
        wurk.redis.rpush("never_admitted:ran", n)
