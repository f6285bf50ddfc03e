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
from django_wurk.core.features.periodic.ticker import Ticker

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


class Firing:
    """The leader's duty of firing the loops: register them first (``take_office``), then
    fire each due occurrence on every pass. A new one is made for each term in office."""

    name = "periodic"

    def __init__(self, wurk: Wurk, specs: Sequence[LoopSpec]) -> None:
        self.ticker = Ticker(wurk, specs)
        self._in_office = False

    def tick(self) -> None:
        if not self._in_office:
            self.ticker.take_office()
            self._in_office = True
        self.ticker.tick()


def feature(specs: Sequence[LoopSpec]) -> Feature:
    """While a process leads, it fires ``specs`` (with ``leadership.feature()`` beside it)."""
    chosen = list(specs)

    def plug(wurk: Wurk) -> Plug:
        return Plug(events=while_leading(wurk, lambda engine, identity: Firing(engine, chosen)))

    return Feature("periodic", plug)


def features(specs: Sequence[LoopSpec], ttl: float = DEFAULT_TTL) -> tuple[Feature, Feature]:
    """The election and the firing of ``specs``: what a worker needs for periodic jobs."""
    return leadership.feature(ttl), feature(specs)


__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_TZ",
    "Loop",
    "LoopFire",
    "LoopSet",
    "LoopSpec",
    "Schedule",
    "current_leader",
    "feature",
    "features",
]
