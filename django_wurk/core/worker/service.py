"""Services: threads a feature runs for as long as a worker process runs.

The worker knows nothing of features (they sit above it), yet some features need a thread
in every worker process: the periodic jobs' leader campaign is one. A feature appends a
``ServiceFactory`` to ``Wurk.services`` when it is installed; each ``Launcher`` calls every
factory once with its engine, its process identity and its shared ``Outage``, starts what
they return after its own threads, and stops them first when it stops (a leader hands over
at once instead of after the jobs drained). Quiet (TSTP) does not reach services: they are
not job fetching, and a quieted leader must keep firing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, Protocol

from django_wurk.core.worker.outage import Outage

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


class Service(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


#: ``factory(wurk, identity, outage)``: one process's instance of a service.
ServiceFactory = Callable[["Wurk", str, Outage], Service]


def build(wurk: Wurk, identity: str, outage: Outage) -> list[Service]:
    """Every service the features installed on ``wurk``, for the process ``identity``."""
    return [factory(wurk, identity, outage) for factory in list(wurk.services)]


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
    """What a watcher may do to the jobs of its worker process (given by the launcher).

    The worker still knows no feature: a feature that must stop jobs (timeouts) asks for
    this through ``Wurk.watchers`` instead of reaching into the manager.
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


#: ``factory(wurk, identity, outage, control)``: one process's instance of a watcher.
WatcherFactory = Callable[["Wurk", str, Outage, JobControl], Service]


def build_watchers(wurk: Wurk, identity: str, outage: Outage, control: JobControl) -> list[Service]:
    """Every watcher the features installed on ``wurk`` (``Wurk.watchers``), for this process."""
    return [factory(wurk, identity, outage, control) for factory in list(wurk.watchers)]
