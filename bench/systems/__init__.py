"""The systems the benchmark compares, one module each, all with the interface of ``base.System``."""

from __future__ import annotations

from bench.systems.base import System


def all_systems() -> list[System]:
    """Every system, in the order of the tables: the compared ones, then the variants that
    exist for one ratio each (noop only), then the Python peers."""
    from bench.systems import celery, dramatiq, huey, rq, sidekiq, wurk

    return [
        wurk.Wurk(processes=2),
        wurk.Wurk(processes=1),
        sidekiq.Sidekiq(),
        sidekiq.Sidekiq(processes=2),
        wurk.Wurk(processes=2, logging=True),
        wurk.Wurk(processes=1, logging=True),
        sidekiq.Sidekiq(logging=True),
        sidekiq.Sidekiq(processes=2, logging=True),
        sidekiq.Sidekiq(driver="hiredis"),
        sidekiq.Sidekiq(processes=2, driver="hiredis"),
        sidekiq.Sidekiq(release="7.3"),
        sidekiq.Sidekiq(release="7.3", processes=2),
        sidekiq.Sidekiq(release="8.0"),
        sidekiq.Sidekiq(release="8.0", processes=2),
        wurk.Wurk(processes=2, hiredis=False),
        wurk.Wurk(processes=1, hiredis=False),
        huey.Huey(),
        dramatiq.Dramatiq(),
        celery.Celery(),
        rq.RQ(),
    ]
