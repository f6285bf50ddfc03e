"""What a worker process offers the features that act on its jobs, and how it exits to be replaced.

The worker knows nothing of features (they sit above it). Features start their threads from
the process's ``startup`` event (``core/events.py``); one that must act on running jobs
(timeouts) reaches them through the ``JobControl`` the event's ``Process`` carries, never
through the manager.
"""

from __future__ import annotations

import threading
from typing import NoReturn, Protocol

#: The exit status of a worker process that asks its supervisor to replace it (a job it
#: cannot stop, see ``JobControl.replace_process``): replaced at once, not counted as a crash.
REPLACE_ME = 75
#: The exit status of a worker process that cannot start and never will as configured (a
#: Redis that refuses it, see ``worker.preflight``): its supervisor stops instead of forking
#: replacements that fail the same way. sysexits' EX_CONFIG.
CANNOT_START = 78

_supervised = False


def mark_supervised() -> None:
    """Called in a swarm's child: a supervisor replaces this process when it exits."""
    global _supervised
    _supervised = True


def supervised() -> bool:
    return _supervised


class JobControl(Protocol):
    """What a feature may do to the jobs of its worker process (given by the launcher).

    The worker still knows no feature: a feature that must stop jobs (timeouts) asks for
    this through the ``Process`` of its ``startup`` event instead of reaching into the manager.
    """

    #: True when a supervisor replaces this process if it exits (``runwurk -P N``) and its
    #: running jobs are recovered then (reliable fetch).
    supervised: bool

    def abandon(
        self, thread: threading.Thread, job: object, failure: BaseException, *, replace: bool = True
    ) -> bool:
        """Record ``failure`` as the outcome of the job ``thread`` runs and, if ``replace``,
        start a thread in its place (``Manager.abandon``); False if the job's thread got back first."""
        ...

    def replace_process(self, reason: str) -> NoReturn:
        """Leave the process set and exit at once with ``REPLACE_ME``, whatever threads are
        stuck: the supervisor starts a fresh process, the jobs still in this one's private
        lists are recovered by reliable fetch. Only when ``supervised``."""
        ...
