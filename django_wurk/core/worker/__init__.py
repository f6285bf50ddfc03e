"""The worker runtime: launcher, manager, processors, fetch, retry, scheduler, heartbeat.

Data flows one way: the launcher starts the heartbeat, the scheduler, the reaper and the
manager; the manager owns the processor threads; a processor asks the fetcher for work and
hands failures to the retry handler, and calls back its manager only to say it died. What
they share is passed to them: the running jobs (``work.WorkSet``, which the heartbeat
reports), the stats and the ``outage.Outage`` that every loop reports to. Each piece is one
module, and an import-linter contract in pyproject.toml keeps the direction.
"""

from django_wurk.core.worker.launcher import Launcher

__all__ = ["Launcher"]
