"""Job timeouts: ``@job(timeout=30)`` stops an attempt that runs longer than 30 seconds.

See ``docs/timeouts.md``. Importing this package declares the ``timeout`` job option and
plugs the feature into the global engine; ``install(wurk)`` does the same for another
``Wurk``: a server middleware that enters each limited job in the process's deadline table,
and a watcher (``Wurk.watchers``) that runs the watchdog in every worker process.
"""

from __future__ import annotations

import functools

from django_wurk.core.engine import Wurk
from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.timeouts.errors import TimedOut
from django_wurk.core.features.timeouts.option import TIMEOUT, check_timeout
from django_wurk.core.features.timeouts.watchdog import Deadlines, TimeoutServerMiddleware, Watchdog
from django_wurk.core.job import declare_job_option
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.service import JobControl


def install(wurk: Wurk) -> None:
    """Plug timeouts into ``wurk`` (idempotent)."""
    if TimeoutServerMiddleware in wurk.server_middleware:
        return
    deadlines = Deadlines()
    # Appended: innermost but for what comes later, so the TimedOut raised in the job passes
    # out through every other middleware (a batch counts the failure, a lock is released).
    wurk.server_middleware.add(TimeoutServerMiddleware, wurk, deadlines)
    wurk.watchers.append(functools.partial(_watchdog, deadlines=deadlines))


def _watchdog(
    wurk: Wurk, identity: str, outage: Outage, control: JobControl, *, deadlines: Deadlines
) -> Watchdog:
    return Watchdog(wurk, identity, outage, control, deadlines)


declare_job_option(TIMEOUT, check_timeout)
install(_wurk)

__all__ = ["TIMEOUT", "TimedOut", "install"]
