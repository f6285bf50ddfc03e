"""The lifecycle of a worker process, as named events anyone may listen to.

Sidekiq names its process's moments (``config.on(:startup)``, ``:quiet``, ``:shutdown``,
``:heartbeat``, Enterprise's ``:leader``) and lets features and applications hang work off
them; so does this engine, with one registry instead of a list per kind of hook:

==============  =====================================================================
``startup``     the process runs: its heartbeat went out, it fetches no job yet
``quiet``       it stopped taking jobs (TSTP, or the start of a stop)
``shutdown``    it is stopping (before the running jobs are waited for)
``heartbeat``   after each heartbeat was written (every ``HEARTBEAT_INTERVAL`` s)
``leader``      this process became the fleet's leader
``leader_lost`` it is not the leader any more (lost the lease, or handed it over)
==============  =====================================================================

A listener is called with the ``Process`` the event is about, on the thread that fires it,
so it must be quick: one that needs a thread of its own starts it at ``startup`` and gives
its stop to ``process.at_stop``, which the process calls (last started, first stopped) as it
stops, before it waits for running jobs. A ``startup`` listener that raises stops the start
(the process does not run without a part it was built with); any other listener that raises
is logged and reported to the error handlers, and stops neither the worker nor the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.events")

#: Every event a process fires, in the order of its life.
EVENTS = ("startup", "quiet", "shutdown", "heartbeat", "leader", "leader_lost")

Listener = Callable[["Process"], None]


class UnknownEvent(ValueError):
    pass


@dataclass(eq=False)
class Process:
    """The worker process an event is about (one per ``Launcher``)."""

    wurk: Wurk
    #: ``host:pid:nonce``, as in the process set.
    identity: str
    #: The process's ``Outage`` (``core/worker/outage.py``): report failed round trips to it.
    outage: Any
    #: What a listener may do to the running jobs (``core/worker/service.JobControl``).
    control: Any = None
    #: Whether this process leads the fleet now, by its lease's own clock (no round trip);
    #: the leadership feature sets it, and a process without it never leads.
    leads: Callable[[], bool] = lambda: False
    #: What each feature runs in this process, by the feature's name (for logs and tests).
    parts: dict[str, Any] = field(default_factory=dict)
    _stops: list[Callable[[], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def at_stop(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` when the process stops (what was started last is stopped first)."""
        with self._lock:
            self._stops.append(stop)

    def stop(self) -> None:
        """Run every ``at_stop`` callback, each once, whatever the others raise."""
        with self._lock:
            stops, self._stops = self._stops[::-1], []
        for stop in stops:
            try:
                stop()
            except Exception:  # one part's failure must not keep the process from stopping
                logger.exception("stopping %r failed", stop)


class Events:
    """Listeners by event name; features' are kept apart so that recomposing replaces them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (owner, listener) per event; owner is a feature's name, or None for an application's.
        self._listeners: dict[str, list[tuple[str | None, Listener]]] = {name: [] for name in EVENTS}

    def on(self, event: str, listener: Listener, *, owner: str | None = None) -> None:
        """Call ``listener(process)`` at every ``event``."""
        if event not in self._listeners:
            raise UnknownEvent(f"no event is called {event!r}; the events are {', '.join(EVENTS)}")
        with self._lock:
            self._listeners[event] = [*self._listeners[event], (owner, listener)]

    def off(self, event: str, listener: Listener) -> None:
        with self._lock:
            self._listeners[event] = [(o, fn) for o, fn in self._listeners[event] if fn is not listener]

    def drop_owner(self, owner: str) -> None:
        """Forget every listener a feature added (before its replacement adds its own)."""
        with self._lock:
            for event, listeners in self._listeners.items():
                self._listeners[event] = [(o, fn) for o, fn in listeners if o != owner]

    def listeners(self, event: str) -> list[Listener]:
        return [fn for _, fn in self._listeners[event]]

    def fire(self, event: str, process: Process, *, strict: bool = False) -> None:
        """Call every listener of ``event`` in the order added; one that raises is reported.

        ``strict`` (``startup``): the first error is raised instead, so a process whose
        features cannot start does not run without them."""
        for owner, listener in self._listeners[event]:
            if strict:
                listener(process)
                continue
            try:
                listener(process)
            except Exception as exc:
                logger.exception(
                    "a %s listener (%s) failed", event, owner or getattr(listener, "__qualname__", listener)
                )
                process.wurk.report_error(exc, {"context": f"{event} listener"})

    def snapshot(self) -> dict[str, list[tuple[str | None, Listener]]]:
        with self._lock:
            return {event: list(listeners) for event, listeners in self._listeners.items()}

    def restore(self, saved: dict[str, list[tuple[str | None, Listener]]]) -> None:
        with self._lock:
            self._listeners = {event: list(listeners) for event, listeners in saved.items()}
