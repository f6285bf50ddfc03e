"""Leader duties: what the fleet's one leader does besides firing loops, for other features.

There is one election per fleet (``dear-leader``), campaigned for by the periodic service of
every worker process that may lead. A feature that needs "exactly one process, every so
often" does not campaign again: it appends a factory to ``Wurk.leader_duties`` and the
periodic service of each process builds one duty from it; on each of its passes (about
every second) while this process leads, it calls the duty's ``tick()``, after the loops
fired. The duty keeps its own schedule (a pass is not an interval). Followers never call it.

A duty's Redis error ends that pass like any other (the outage is reported, the pass tried
again a second later); any other exception is logged and sent to the error handlers, and
neither stops the loops nor the other duties. A duty that must not act twice across a
change of leader checks the lease again inside its own Lua script (historical metrics do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


class LeaderDuty(Protocol):
    #: Names it in logs and in the context error handlers receive.
    name: str

    def tick(self) -> None:
        """Called on every pass of the leader's service while this process leads."""


#: ``factory(wurk, identity)``: one process's duty (``identity`` is the campaign's, ``host:pid:nonce``).
DutyFactory = Callable[["Wurk", str], LeaderDuty]


def add_duty(wurk: Wurk, factory: DutyFactory, name: str) -> None:
    """Have the leader of ``wurk``'s fleet run the duty ``factory`` builds; ``name`` replaces
    an earlier duty of that name (installing twice runs it once)."""
    factory.leader_duty = name  # type: ignore[attr-defined]
    wurk.leader_duties[:] = [f for f in wurk.leader_duties if getattr(f, "leader_duty", None) != name]
    wurk.leader_duties.append(factory)


def remove_duty(wurk: Wurk, name: str) -> None:
    wurk.leader_duties[:] = [f for f in wurk.leader_duties if getattr(f, "leader_duty", None) != name]
