"""The manager owns the processor threads and decides what happens to their jobs at stop.

Quiet means: stop fetching, finish what is running. Stop means: quiet, wait up to the
timeout, then interrupt what is still running and push those jobs back to their queues
(RPUSH, so they are fetched first by whoever picks up next). A job that finishes after it
was pushed back could run twice, which is the at-least-once promise we document.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core import coroutines, wire
from django_wurk.core.control import Cancelled
from django_wurk.core.worker.fetch import ReliableFetch, UnitOfWork, fetch_for
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.processor import ACKNOWLEDGE_WITHIN, Processor, Shutdown
from django_wurk.core.worker.retry import RetryHandler
from django_wurk.core.worker.stats import Stats
from django_wurk.core.worker.work import WorkSet

if TYPE_CHECKING:
    from django_wurk.core.config import Config
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.manager")

#: Seconds a stop waits for an unreachable Redis to take unfinished jobs back, past the shutdown
#: timeout: a stop must end within it (Kubernetes's default grace is Sidekiq's 25 s and 5 more),
#: and with reliable fetch nothing is lost by giving up (the jobs stay in the private lists,
#: which another worker's reaper recovers); with basic fetch their payloads go to the log.
PUSH_BACK_WITHIN = 2.0
#: The same for the sweep of the private lists when no job was running: nothing is in memory.
SWEEP_WITHIN = 1.0


def interrupt(thread: threading.Thread) -> None:
    """Raise ``Shutdown`` in another thread at its next bytecode (C calls run to completion)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(Shutdown))
        coroutines.wake(thread)  # an async job's loop may be asleep in select()


class Manager:
    """Owns the processor threads and what they share: the fetcher, the retry handler, the running jobs."""

    def __init__(
        self,
        wurk: Wurk,
        stats: Stats,
        outage: Outage,
        identity: str,
        config: Config | None = None,
        name: str = "default",
    ) -> None:
        self.wurk = wurk
        #: One capsule's view (its queues and concurrency), or the whole configuration.
        self.config = config if config is not None else wurk.config
        #: The capsule this manager runs (``WURK["CAPSULES"]``), for logs and thread names.
        self.name = name
        self.stats = stats
        self.outage = outage
        self.fetch = fetch_for(self.config, wurk.redis, wurk.scripts, identity)
        self.retry = RetryHandler(wurk)
        #: The jobs running now; the heartbeat reports them.
        self.work = WorkSet()
        self.quieting = threading.Event()
        #: Set when the stop begins: long jobs may save their place and leave (``processor.stopping``).
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.processors: list[Processor] = []
        self._reclaiming = threading.Lock()

    def start(self) -> None:
        for i in range(self.config.concurrency):
            self._spawn(i)

    def _spawn(self, index: int) -> None:
        processor = Processor(
            self.wurk,
            index,
            fetch=self.fetch,
            retry=self.retry,
            stats=self.stats,
            outage=self.outage,
            work=self.work,
            quieting=self.quieting,
            on_died=self.processor_died,
            on_fetch_lost=self.reclaim_strays,
            stopping=self.stopping,
        )
        if self.name != "default":  # thread dumps and logs tell the capsules apart
            processor.thread.name = f"wurk-processor-{self.name}-{index}"
        self.processors.append(processor)
        processor.start()

    def processor_died(self, processor: Processor) -> None:
        """A processor's thread ended on an unexpected error: start another in its place."""
        with self._lock:
            if processor in self.processors:
                index = self.processors.index(processor)
                self.processors.remove(processor)
            else:
                return
        if not self.quieting.is_set():
            self._spawn(index)

    def replace_dead(self) -> int:
        """Start a thread in the place of every processor whose thread ended unseen; how many.

        ``processor_died`` covers a thread that ends through its own ``except``; this covers
        every other way (an error in its ``finally``, an exception raised into it from
        outside), so the process never runs on with fewer threads than ``CONCURRENCY``
        while its heartbeat says all is well. The launcher calls it about once a second.
        """
        if self.quieting.is_set():
            return 0
        with self._lock:
            dead = [p for p in self.processors if p.started and not p.retired and not p.thread.is_alive()]
            for p in dead:
                self.processors.remove(p)
        for p in dead:
            logger.error("processor thread %s ended unexpectedly: starting another", p.thread.name)
            self._spawn(p.index)
        return len(dead)

    def wait_for_idle_threads(self, deadline: float) -> None:
        """Quiet, then wait until ``deadline`` for every thread not running a job to end.

        Before a process exits on purpose (``Launcher.replace_process``): a thread that just
        recorded its job's outcome acknowledges it as it ends, and the acknowledgement must
        reach Redis first, or the job's recovery runs it again. Threads running a job are
        not waited for: their jobs are recovered, as documented.
        """
        self.quiet()
        while time.monotonic() < deadline:
            busy = {w.thread for w in self.work.snapshot().values()}
            with self._lock:
                waiting = [
                    p
                    for p in self.processors
                    if not p.retired and p.thread.is_alive() and p.thread not in busy
                ]
            if not waiting:
                return
            waiting[0].thread.join(min(0.05, max(0.0, deadline - time.monotonic())))

    def live_threads(self) -> int:
        """Processor threads running now, a thread given up on (``abandon``) not counted."""
        with self._lock:
            return sum(1 for p in self.processors if not p.retired and p.thread.is_alive())

    def abandon(
        self, thread: threading.Thread, job: object, failure: BaseException, *, replace: bool = True
    ) -> bool:
        """Give up on the job ``thread`` is running: record ``failure`` as its outcome, and
        put a new processor thread in that one's place.

        For a job that will not come back (blocked in C code or a socket past its limit):
        Python cannot stop a thread, so the thread is left to itself; if it ever returns it
        records nothing (``Processor`` sees the job abandoned) and ends. The failure goes
        through the retry handler like any other, then the job is acknowledged, so it is
        neither lost nor run again by a reliable-fetch recovery. False if the job's thread
        got back first: its own outcome stands. ``replace=False`` (the process is about to be
        replaced) quiets the manager instead of starting a thread.
        """
        work = self.work.abandon(thread)
        if work is None:
            return False
        if not replace:
            self.quiet()  # the process is about to be replaced: take no job it would not finish
        with self._lock:
            owner = next((p for p in self.processors if p.thread is thread), None)
            if owner is not None:
                owner.retired = True  # not replaced by ``replace_dead`` if it returns meanwhile
        unit = work.unit
        try:
            payload = wire.loads(unit.raw)
        except wire.PayloadError:
            payload = {}
        if isinstance(failure, Cancelled):
            # A cancelled job that would not stop: its outcome is that it was cancelled, so
            # nothing is written for it (no failure, no retry); it is only acknowledged.
            recorded = True
        else:
            name = wire.job_display_class(payload) if payload else "?"
            self.stats.record(name, (time.time() - work.run_at) * 1000, True, time.time())
            self.wurk.report_error(
                failure, {"context": "Job raised exception", "job": payload, "queue": unit.queue}
            )
            recorder = owner if owner is not None else self._recorder()
            recorded = recorder.record_failure(unit, job, failure)

        def give_up(exc: RedisError) -> None:
            logger.error("could not acknowledge an abandoned job (%s); it may run again", exc)

        # Through the fetch, on the stuck thread's behalf: the job leaves the private list and
        # then the fetch's held jobs (until then a stray sweep still sees it held).
        self.outage.ride_out(
            lambda: self.fetch.abandon(thread, unit if recorded else None),
            time.monotonic() + ACKNOWLEDGE_WITHIN,
            give_up,
        )
        # Only now: until the job is acknowledged, its processor still holds it, so a stray
        # sweep (``reclaim_strays``) cannot take it for a lost fetch and push it back.
        if owner is not None:
            with self._lock:
                if owner in self.processors:
                    self.processors.remove(owner)
            if replace and not self.quieting.is_set():
                self._spawn(owner.index)
        return True

    def _recorder(self) -> Processor:
        """A processor object that is never started, for its outcome-recording methods."""
        return Processor(
            self.wurk,
            -1,
            fetch=self.fetch,
            retry=self.retry,
            stats=self.stats,
            outage=self.outage,
            work=self.work,
            quieting=self.quieting,
            on_died=lambda p: None,
            on_fetch_lost=lambda: True,
        )

    def reclaim_strays(self) -> bool:
        """Push back jobs in this process's private lists that none of its threads holds.

        A fetch whose connection failed may still have run on the server and moved a job
        into a private list; its reply was lost, so no thread runs that job, and the reaper
        leaves the lists of a live process alone. False if it could not decide yet (a fetch
        of another thread did not end in time); Redis errors propagate to the caller.
        """
        fetch = self.fetch
        if not isinstance(fetch, ReliableFetch):
            return True  # with basic fetch such a job left Redis with the lost reply
        with self._reclaiming:
            listed = fetch.listed()
            # A fetch under way when the lists were read may have moved a job there whose reply
            # is still coming; it is held once that fetch ends. Bounded by its socket timeouts.
            config = self.config
            deadline = time.monotonic() + 3 * config.redis_socket_timeout + 2 * config.fetch_timeout
            for p in list(self.processors):
                count = p.fetches  # before ``fetching``: a fetch that ends in between changes it
                if not p.fetching:
                    continue
                while p.fetches == count and p.thread.is_alive():
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.01)  # a rare path: no event on the per-job path for it
            held = Counter((unit.queue, unit.raw) for unit in fetch.held())
            strays = []
            for unit in listed:
                if held[(unit.queue, unit.raw)]:
                    held[(unit.queue, unit.raw)] -= 1
                else:
                    strays.append(unit)
            moved = fetch.push_back(strays)  # each move only if the job is still there
        if moved:
            logger.warning(
                "pushed %d job(s) back to their queues from this process's private lists: a fetch "
                "moved them there but its reply was lost with the connection",
                moved,
            )
        return True

    def quiet(self) -> None:
        self.quieting.set()

    def stop(self, timeout: float, hurry: threading.Event | None = None) -> int:
        """Quiet, wait up to ``timeout``, push back what is unfinished; returns how many were pushed back.

        ``hurry``, once set, ends the wait early (a second TERM). It is only polled, never
        waited on, so an OS signal handler may set it while this thread is in here.
        """
        self.stopping.set()
        self.quiet()
        deadline = time.monotonic() + timeout
        for p in list(self.processors):
            while p.thread.is_alive() and not (hurry is not None and hurry.is_set()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                p.thread.join(min(remaining, 0.1) if hurry is not None else remaining)
        unfinished = self.work.interrupt_unfinished(interrupt)
        if not unfinished:
            if self.config.fetch == "reliable":
                self._push_back([], deadline=time.monotonic() + SWEEP_WITHIN)  # leftovers, if any
            return 0
        # Let interrupted threads unwind, then push back whatever still has not finished.
        grace = time.monotonic() + 1.0
        for work in unfinished:
            work.thread.join(max(0.0, grace - time.monotonic()))
        requeue = self.work.still_unfinished(unfinished)
        self._push_back(requeue, deadline=max(deadline, time.monotonic() + PUSH_BACK_WITHIN))
        return len(requeue)

    def _push_back(self, units: list[UnitOfWork], deadline: float) -> None:
        """Requeue unfinished jobs, riding out a Redis outage until ``deadline``.

        Reliable fetch also sweeps this process's private lists, so it runs even with no
        ``units``. With basic fetch these jobs exist only in this process; if Redis stays
        down past the deadline their payloads go to the log at CRITICAL, the last place
        they can be kept.
        """
        if not units and self.config.fetch == "basic":
            return

        def requeue() -> bool:
            self.fetch.requeue(units)
            return True

        def give_up(exc: RedisError) -> bool:
            for unit in units:
                logger.critical(
                    "could not push an unfinished job back to queue %r (%s); its payload: %r",
                    unit.queue,
                    exc,
                    unit.raw,
                )
            return False

        if self.outage.ride_out(requeue, deadline, give_up):
            for unit in units:
                logger.warning("pushed an unfinished job back to queue %r", unit.queue)
