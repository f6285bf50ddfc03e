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

    __slots__ = ("abandoned", "finished", "run_at", "settled", "thread", "unit")

    def __init__(self, unit: UnitOfWork, thread: threading.Thread, run_at: int | None = None) -> None:
        self.unit = unit
        self.thread = thread
        self.run_at = int(time.time()) if run_at is None else run_at
        #: Its outcome is recorded: pushing it back now would run it twice.
        self.finished = False
        #: Its thread is back from the job and records the outcome itself: too late to abandon it.
        self.settled = False
        #: Given up on while still running (``WorkSet.abandon``): its outcome was recorded for it,
        #: and whatever its thread does if it ever comes back is ignored.
        self.abandoned = False


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
        """``finish(work)`` and ``end(tid)`` in one step, for the job that ended normally.

        An abandoned job already left the busy set and its outcome was recorded for it: its
        thread, if it ever gets here, must change nothing (``tid`` may be reused by then).
        """
        with self._lock:
            if work.abandoned:
                return
            work.finished = True
            if self._busy.get(tid) is work:
                del self._busy[tid]
        if not self.changed.is_set():
            self.changed.set()

    def settle(self, work: Work) -> bool:
        """The job's thread is back from the job: True if the outcome is still its to record.

        False when the job was abandoned meanwhile: its outcome was recorded for it, and the
        thread must record nothing and end (another thread already took its place).
        """
        with self._lock:
            if work.abandoned:
                return False
            work.settled = True
            return True

    def abandon(self, thread: threading.Thread) -> Work | None:
        """Give up on the job ``thread`` runs, unless its thread is already back from it.

        The job leaves the busy set at once (the stop will not push it back, the heartbeat
        no longer shows it) and is marked so that its thread, if it ever returns, records
        nothing. Returns the job, or None if there was nothing left to give up on.
        """
        with self._lock:
            for tid, work in self._busy.items():
                if work.thread is thread and not (work.settled or work.finished or work.abandoned):
                    work.abandoned = work.finished = True
                    del self._busy[tid]
                    return work
        return None

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
        #: One event for every capsule: a job starting or ending in any of them wakes the
        #: heartbeat's pulse, which writes them all together.
        self.changed = threading.Event()
        for work in sets:
            work.changed = self.changed

    def snapshot(self) -> dict[str, Work]:
        busy: dict[str, Work] = {}
        for work in self.sets:
            busy.update(work.snapshot())
        return busy
