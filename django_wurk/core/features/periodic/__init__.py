"""Periodic jobs (Sidekiq Enterprise's): cron-scheduled pushes, fired by one leader.

See ``docs/periodic.md``. ``install(wurk, specs)`` makes every worker process of ``wurk``
campaign for the lead and, while it leads, fire the loops ``specs``; the Django app does it
from ``WURK["PERIODIC"]``. ``LoopSet`` is the data API over what is registered in Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_wurk.core.features.periodic.leader import DEFAULT_TTL
from django_wurk.core.features.periodic.loops import DEFAULT_TZ, LoopSpec, Schedule
from django_wurk.core.features.periodic.loopset import Loop, LoopFire, LoopSet, current_leader
from django_wurk.core.features.periodic.ticker import REFRESH_INTERVAL, LoopSource

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.service import Service


def install(
    wurk: Wurk,
    specs: Sequence[LoopSpec],
    ttl: float = DEFAULT_TTL,
    *,
    source: LoopSource | None = None,
    refresh: float = REFRESH_INTERVAL,
) -> None:
    """Have each worker process of ``wurk`` campaign for the lead and, leading, fire ``specs``,
    and the loops ``source()`` returns, asked again every ``refresh`` seconds (``ticker.py``).

    Installing again replaces the earlier installation (one campaign per process).
    """
    if not ttl > 0:
        raise ValueError(f"the leader ttl must be greater than 0, got {ttl!r}")
    if not refresh > 0:
        raise ValueError(f"the refresh interval must be greater than 0, got {refresh!r}")
    chosen = list(specs)

    def periodic_service(engine: Wurk, identity: str, outage: Outage) -> Service:
        from django_wurk.core.features.periodic.service import PeriodicService

        return PeriodicService(engine, identity, outage, chosen, ttl, source, refresh)

    periodic_service.periodic = True  # type: ignore[attr-defined]
    wurk.services[:] = [s for s in wurk.services if not getattr(s, "periodic", False)]
    wurk.services.append(periodic_service)


__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_TZ",
    "Loop",
    "LoopFire",
    "LoopSet",
    "LoopSource",
    "LoopSpec",
    "Schedule",
    "current_leader",
    "install",
]
