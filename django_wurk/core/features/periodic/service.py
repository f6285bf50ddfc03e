"""The periodic service: each worker process's thread that campaigns and, as leader, fires.

As leader it also runs the duties other features added (``duties.py``), after the loops.

One thread, not two: leadership and firing share one clock and one error policy (a Redis
outage is reported through the process's ``Outage`` and the pass is tried again a second
later). It ticks every ``TICK_INTERVAL`` seconds, so an occurrence fires within about a
second of its time; each tick of the leader costs one ``TIME`` and one ``HGET`` per loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.duties import LeaderDuty
from django_wurk.core.features.periodic.leader import Campaign
from django_wurk.core.features.periodic.loops import LoopSpec
from django_wurk.core.features.periodic.ticker import REFRESH_INTERVAL, LoopSource, Ticker
from django_wurk.core.worker.loop import Loop
from django_wurk.core.worker.outage import Outage

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.periodic")

#: Seconds between passes (shorter when the leader ttl is so short that renewing needs it).
TICK_INTERVAL = 1.0


class PeriodicService(Loop):
    name = "periodic"

    def __init__(
        self,
        wurk: Wurk,
        identity: str,
        outage: Outage,
        specs: Sequence[LoopSpec],
        ttl: float,
        source: LoopSource | None = None,
        refresh: float = REFRESH_INTERVAL,
    ) -> None:
        super().__init__(wurk, outage)
        self.campaign = Campaign(wurk.scripts, identity, ttl, self._leader_ttl_left)
        self.ticker = Ticker(wurk, specs, source, refresh)
        #: What other features have the leader do (``duties.py``), built once for this process.
        self.duties: list[LeaderDuty] = [factory(wurk, identity) for factory in list(wurk.leader_duties)]
        #: Set when this process takes the lead; cleared once it has registered and pruned.
        self._in_office = False

    def _leader_ttl_left(self) -> float | None:
        """Seconds until ``dear-leader`` expires; None when it has no expiry or is gone."""
        left = self.wurk.redis.pttl(keys.LEADER)
        return left / 1000 if isinstance(left, int) and left > 0 else None

    def initial_wait(self) -> float:
        return 0.0  # campaign at once: a fleet without a leader fires nothing

    def interval(self) -> float:
        return min(TICK_INTERVAL, self.campaign.ttl / 4)

    def tick(self) -> None:
        if self.campaign.due() and self.campaign.step():
            self._in_office = False
        if not self.campaign.leading():
            return
        if not self._in_office:
            self.ticker.take_office()
            self._in_office = True
        self.ticker.tick()
        for duty in self.duties:
            try:
                duty.tick()
            except RedisError:
                raise
            except Exception as exc:  # one duty's bug must stop neither the loops nor the others
                logger.exception("leader duty %s failed", duty.name)
                self.wurk.report_error(exc, {"context": f"leader duty {duty.name}"})

    def stop(self) -> None:
        super().stop()
        try:
            self.campaign.resign()
        except RedisError as exc:  # the lease then simply expires
            logger.warning(
                "could not give the lead back (%s); it expires within %.0f s", exc, self.campaign.ttl
            )
