"""Periodic jobs (Sidekiq Enterprise's): cron-scheduled pushes, fired by one leader.

See ``docs/periodic.md``. ``feature(specs)`` is the leader's duty of firing the loops
``specs`` (the Django app builds them from ``WURK["PERIODIC"]``); it needs the fleet's
election, ``leadership.feature(ttl)``, beside it. ``LoopSet`` is the data API over what is
registered in Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_wurk.core.feature import Feature, Plug
from django_wurk.core.features.periodic import leadership
from django_wurk.core.features.periodic.duties import while_leading
from django_wurk.core.features.periodic.leader import DEFAULT_TTL
from django_wurk.core.features.periodic.loops import DEFAULT_TZ, LoopSpec, Schedule
from django_wurk.core.features.periodic.loopset import Loop, LoopFire, LoopSet, current_leader
from django_wurk.core.features.periodic.ticker import REFRESH_INTERVAL, LoopSource, Ticker

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


class Firing:
    """The leader's duty of firing the loops: register them first (``take_office``), then
    fire each due occurrence on every pass. A new one is made for each term in office."""

    name = "periodic"

    def __init__(
        self,
        wurk: Wurk,
        specs: Sequence[LoopSpec],
        source: LoopSource | None = None,
        refresh: float = REFRESH_INTERVAL,
    ) -> None:
        self.ticker = Ticker(wurk, specs, source, refresh)
        self._in_office = False

    def tick(self) -> None:
        if not self._in_office:
            self.ticker.take_office()
            self._in_office = True
        self.ticker.tick()


def feature(
    specs: Sequence[LoopSpec], source: LoopSource | None = None, refresh: float = REFRESH_INTERVAL
) -> Feature:
    """While a process leads, it fires ``specs`` (with ``leadership.feature()`` beside it),
    and the loops ``source()`` returns, asked again every ``refresh`` seconds (``ticker.py``:
    the Django app's admin schedules come this way)."""
    if not refresh > 0:
        raise ValueError(f"the refresh interval must be greater than 0, got {refresh!r}")
    chosen = list(specs)

    def plug(wurk: Wurk) -> Plug:
        return Plug(
            events=while_leading(wurk, lambda engine, identity: Firing(engine, chosen, source, refresh))
        )

    return Feature("periodic", plug)


def features(
    specs: Sequence[LoopSpec],
    ttl: float = DEFAULT_TTL,
    *,
    source: LoopSource | None = None,
    refresh: float = REFRESH_INTERVAL,
) -> tuple[Feature, Feature]:
    """The election and the firing of ``specs`` (and of ``source``'s loops): what a worker
    needs for periodic jobs."""
    return leadership.feature(ttl), feature(specs, source, refresh)


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
    "feature",
    "features",
]
