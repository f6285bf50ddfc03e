"""The worker runtime: launcher, manager, processors, fetch, retry, scheduler, heartbeat.

Data flows one way: the launcher starts the heartbeat, the scheduler and the manager; the
manager owns the processor threads; a processor asks the fetcher for work and hands
failures to the retry handler. Each piece is one module.
"""

from django_wurk.core.worker.launcher import Launcher

__all__ = ["Launcher"]
