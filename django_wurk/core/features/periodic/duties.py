"""Leader duties: what the fleet's one leader does, for any feature that needs "exactly one
process, every so often" (periodic jobs' firing, historical metrics, StatsD's gauges).

There is one election per fleet (``leadership.py``), and a process that takes or loses the
lead fires the ``leader`` and ``leader_lost`` events. A duty never campaigns itself: a
feature plugs in ``while_leading(...)``'s listeners, and each process that leads runs the
duty on a routine of its own, calling its ``tick()`` about every second while it still
leads (by its lease's own clock), until it loses the lead or stops. The duty keeps its own
schedule (a pass is not an interval).

A duty's Redis error ends that pass like any other (the outage is reported, the pass tried
again a second later); any other exception is logged and sent to the error handlers, and
stops neither this duty nor the others. A duty that must not act twice across a change of
leader checks the lease again inside its own Lua script (historical metrics do).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from django_wurk.core.events import Listener, Process
from django_wurk.core.worker.routine import Routine

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: Seconds between a duty's passes while its process leads.
TICK_INTERVAL = 1.0


class LeaderDuty(Protocol):
    #: Names it in logs and in the context error handlers receive.
    name: str

    def tick(self) -> None:
        """Called about every second while this process leads."""


#: ``factory(wurk, identity)``: one process's duty (``identity`` is its ``host:pid:nonce``).
DutyFactory = Callable[["Wurk", str], LeaderDuty]


class DutyRoutine(Routine):
    """One duty of one leading process, on a thread of its own."""

    def __init__(self, wurk: Wurk, process: Process, duty: LeaderDuty) -> None:
        self.name = f"duty-{duty.name}"
        super().__init__(wurk, process.outage)
        self.process = process
        self.duty = duty

    def initial_wait(self) -> float:
        return 0.0  # a new leader acts at once

    def interval(self) -> float:
        return TICK_INTERVAL

    def tick(self) -> None:
        if self.process.leads():
            self.duty.tick()


def while_leading(wurk: Wurk, factory: DutyFactory) -> dict[str, Listener]:
    """The listeners that run the duty ``factory`` makes while a process of ``wurk`` leads."""
    running: dict[Process, DutyRoutine] = {}
    lock = threading.Lock()

    def start(process: Process) -> None:
        with lock:
            if process in running:
                return
            routine = running[process] = DutyRoutine(wurk, process, factory(wurk, process.identity))
            process.parts[routine.name] = routine
        routine.start()

    def stop(process: Process) -> None:
        with lock:
            routine = running.pop(process, None)
            if routine is not None:
                process.parts.pop(routine.name, None)
        if routine is not None:
            routine.stop()

    return {"leader": start, "leader_lost": stop, "shutdown": stop}
