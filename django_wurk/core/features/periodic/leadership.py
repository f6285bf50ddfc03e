"""The fleet's election, as a feature: each worker process campaigns on a routine of its own
and fires ``leader`` when it takes the lead and ``leader_lost`` when it no longer holds it.

What the leader does is not this module's business: periodic jobs' firing, historical
metrics and StatsD's gauges are duties that listen for those events (``duties.py``), so any
of them works without the others. The lease itself is ``leader.Campaign``'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core.events import Process
from django_wurk.core.feature import Feature, Plug
from django_wurk.core.features.periodic.leader import DEFAULT_TTL, Campaign
from django_wurk.core.worker.routine import Routine

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.periodic")

#: Seconds between the campaign's passes (shorter when the ttl is so short that renewing needs it).
TICK_INTERVAL = 1.0


class CampaignRoutine(Routine):
    name = "leader"

    def __init__(self, wurk: Wurk, process: Process, ttl: float) -> None:
        super().__init__(wurk, process.outage)
        self.process = process
        self.campaign = Campaign(wurk.scripts, process.identity, ttl, self._ttl_left, wurk.config.leader_key)
        process.leads = self.campaign.leading
        process.parts["leader"] = self
        #: Whether ``leader`` was fired and ``leader_lost`` not yet.
        self._told = False

    def _ttl_left(self) -> float | None:
        """Seconds until the lease expires; None when it has no expiry or is gone."""
        left = self.wurk.redis.pttl(self.campaign.key)
        return left / 1000 if isinstance(left, int) and left > 0 else None

    def initial_wait(self) -> float:
        return 0.0  # campaign at once: a fleet without a leader does none of its duties

    def interval(self) -> float:
        return min(TICK_INTERVAL, self.campaign.ttl / 4)

    def tick(self) -> None:
        try:
            if self.campaign.due():
                self.campaign.step()
        finally:
            self._tell(self.campaign.leading())

    def _tell(self, leading: bool) -> None:
        if leading != self._told:
            self._told = leading
            self.wurk.events.fire("leader" if leading else "leader_lost", self.process)

    def stop(self) -> None:
        super().stop()
        try:
            self.campaign.resign()
        except RedisError as exc:  # the lease then simply expires
            logger.warning(
                "could not give the lead back (%s); it expires within %.0f s", exc, self.campaign.ttl
            )
        self._tell(False)


def feature(ttl: float = DEFAULT_TTL) -> Feature:
    """Every worker process campaigns for the lead (a lease of ``ttl`` seconds)."""
    if not ttl > 0:
        raise ValueError(f"the leader ttl must be greater than 0, got {ttl!r}")

    def plug(wurk: Wurk) -> Plug:
        def campaign(process: Process) -> None:
            routine = CampaignRoutine(wurk, process, ttl)
            routine.start()
            process.at_stop(routine.stop)

        return Plug(events={"startup": campaign})

    return Feature("leader", plug)
