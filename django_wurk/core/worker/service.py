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

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

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
