"""Job timeouts: ``@job(timeout=30)`` stops an attempt that runs longer than 30 seconds.

See ``docs/timeouts.md``. ``FEATURE`` reads the ``timeout`` (and ``soft_timeout``) job options
and plugs in a server middleware that enters each limited job in the process's deadline
table, and, at each worker process's ``startup``, the watchdog thread that enforces it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.events import Process
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.features.timeouts.errors import SoftTimedOut, TimedOut
from django_wurk.core.features.timeouts.option import SOFT_TIMEOUT, TIMEOUT, check_soft_timeout, check_timeout
from django_wurk.core.features.timeouts.watchdog import Deadlines, TimeoutServerMiddleware, Watchdog

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


def plug(wurk: Wurk) -> Plug:
    deadlines = Deadlines()

    def start_watchdog(process: Process) -> None:
        watchdog = Watchdog(wurk, process.identity, process.outage, process.control, deadlines)
        watchdog.start()
        process.at_stop(watchdog.stop)

    return Plug(server=TimeoutServerMiddleware(wurk, deadlines), events={"startup": start_watchdog})


FEATURE = Feature(
    "timeouts",
    plug,
    # Next to the job, inside every feature but encryption's: the limit is for the job itself,
    # and the TimedOut raised in it passes out through the others (a batch counts the failure,
    # a lock is released).
    server_place=Place(inside=("status", "expiring")),
    job_options={TIMEOUT: check_timeout, SOFT_TIMEOUT: check_soft_timeout},
)

__all__ = ["FEATURE", "SOFT_TIMEOUT", "TIMEOUT", "SoftTimedOut", "TimedOut"]
