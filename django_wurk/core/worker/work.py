"""The jobs this process is running: what the heartbeat reports and the stop pushes back.

Three parties share it, each from its own thread: a processor adds its job when it starts
and removes it when it ends, the heartbeat copies the set into ``<identity>:work`` (the
Web UI's Busy page), and the manager's stop interrupts the jobs still running and pushes
them back. One lock makes "finished" and "interrupted" exclusive: a job marked finished is
never interrupted, so its outcome is not recorded and then pushed back as well.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django_wurk.core.worker.fetch import UnitOfWork


@dataclass
class Work:
    """A job being run, as the heartbeat reports it."""

    unit: UnitOfWork
    thread: threading.Thread
    run_at: int = field(default_factory=lambda: int(time.time()))
    #: Its outcome is recorded: pushing it back now would run it twice.
    finished: bool = False


class WorkSet:
    """Running jobs by processor thread id (Sidekiq's ``tid``), behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: dict[str, Work] = {}

    def start(self, tid: str, unit: UnitOfWork) -> Work:
        """The current thread runs ``unit`` from now until ``end(tid)``.

        Two calls rather than a context manager: this runs for every job, and a generator
        based one costs more than the rest of the bookkeeping together.
        """
        work = Work(unit, threading.current_thread())
        with self._lock:
            self._busy[tid] = work
        return work

    def end(self, tid: str) -> None:
        with self._lock:
            self._busy.pop(tid, None)

    def finish(self, work: Work) -> None:
        """Its outcome is recorded: from now on the stop leaves it alone."""
        with self._lock:
            work.finished = True

    def snapshot(self) -> dict[str, Work]:
        with self._lock:
            return dict(self._busy)

    def interrupt_unfinished(self, interrupt: Callable[[threading.Thread], None]) -> list[Work]:
        """Call ``interrupt`` on the thread of every job not finished yet; returns those jobs.

        Under the lock, so a job cannot be marked finished between the check and the interrupt.
        """
        with self._lock:
            unfinished = [w for w in self._busy.values() if not w.finished]
            for work in unfinished:
                interrupt(work.thread)
        return unfinished

    def still_unfinished(self, works: list[Work]) -> list[UnitOfWork]:
        """The jobs among ``works`` that did not finish after all (to push back)."""
        with self._lock:
            return [w.unit for w in works if not w.finished]


class WorkSets:
    """The running jobs of every capsule of a process, as one heartbeat reports them.

    Each capsule's manager keeps its own ``WorkSet`` (its stop interrupts and pushes back only
    its own jobs, through its own fetch); the heartbeat lists them together. Thread ids are
    unique in the process, so the union loses nothing.
    """

    def __init__(self, sets: list[WorkSet]) -> None:
        self.sets = sets

    def snapshot(self) -> dict[str, Work]:
        busy: dict[str, Work] = {}
        for work in self.sets:
            busy.update(work.snapshot())
        return busy
