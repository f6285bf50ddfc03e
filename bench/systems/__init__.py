"""The systems the benchmark compares, one module each, all with the interface of ``base.System``."""

from __future__ import annotations

from bench.systems.base import System


def all_systems() -> list[System]:
    """Every system, in the order of the tables."""
    from bench.systems import celery, dramatiq, huey, rq, sidekiq, wurk

    return [
        wurk.Wurk(processes=2),
        wurk.Wurk(processes=1),
        sidekiq.Sidekiq(),
        huey.Huey(),
        dramatiq.Dramatiq(),
        celery.Celery(),
        rq.RQ(),
    ]
