"""The jobs this process is running: what the heartbeat reports and the stop pushes back.

Three parties share it, each from its own thread: a processor adds its job when it starts
and removes it when it ends, the heartbeat copies the set into ``<identity>:work`` (the
Web UI's Busy page), and the manager's stop interrupts the jobs still running and pushes
them back. One lock makes "finished" and "interrupted" exclusive: a job marked finished is
never interrupted, so its outcome is not recorded and then pushed back as well.

``changed`` wakes the heartbeat when a job starts or ends, so the Busy page shows it within
a second instead of at the next 10-second beat. Setting it is only a flag check once set:
under load it stays set until the heartbeat's next write, and Redis sees one write per
half second at most however many jobs start, never one per job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django_wurk.core.worker.fetch import UnitOfWork


class Work:
    """A job being run, as the heartbeat reports it. One is made per job: a plain class."""

    __slots__ = ("finished", "run_at", "thread", "unit")

    def __init__(self, unit: UnitOfWork, thread: threading.Thread, run_at: int | None = None) -> None:
        self.unit = unit
        self.thread = thread
        self.run_at = int(time.time()) if run_at is None else run_at
        #: Its outcome is recorded: pushing it back now would run it twice.
        self.finished = False


class WorkSet:
    """Running jobs by processor thread id (Sidekiq's ``tid``), behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: dict[str, Work] = {}
        #: Set when the busy set changed since the heartbeat last wrote it.
        self.changed = threading.Event()

    def start(self, tid: str, unit: UnitOfWork, thread: threading.Thread | None = None) -> Work:
        """The current thread (``thread``, if the caller has it at hand) runs ``unit`` from
        now until ``end(tid)`` or ``done(tid, work)``.

        Two calls rather than a context manager: this runs for every job, and a generator
        based one costs more than the rest of the bookkeeping together.
        """
        work = Work(unit, thread or threading.current_thread())
        with self._lock:
            self._busy[tid] = work
        if not self.changed.is_set():
            self.changed.set()
        return work

    def end(self, tid: str) -> None:
        with self._lock:
            self._busy.pop(tid, None)
        if not self.changed.is_set():
            self.changed.set()

    def finish(self, work: Work) -> None:
        """Its outcome is recorded: from now on the stop leaves it alone."""
        with self._lock:
            work.finished = True

    def done(self, tid: str, work: Work) -> None:
        """``finish(work)`` and ``end(tid)`` in one step, for the job that ended normally."""
        with self._lock:
            work.finished = True
            self._busy.pop(tid, None)
        if not self.changed.is_set():
            self.changed.set()

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
