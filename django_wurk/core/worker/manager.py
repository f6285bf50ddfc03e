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
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core import coroutines
from django_wurk.core.worker.fetch import UnitOfWork, fetch_for
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.processor import Processor, Shutdown
from django_wurk.core.worker.retry import RetryHandler
from django_wurk.core.worker.stats import Stats
from django_wurk.core.worker.work import WorkSet

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.manager")


def interrupt(thread: threading.Thread) -> None:
    """Raise ``Shutdown`` in another thread at its next bytecode (C calls run to completion)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(Shutdown))
        coroutines.wake(thread)  # an async job's loop may be asleep in select()


class Manager:
    """Owns the processor threads and what they share: the fetcher, the retry handler, the running jobs."""

    def __init__(self, wurk: Wurk, stats: Stats, outage: Outage, identity: str) -> None:
        self.wurk = wurk
        self.config = wurk.config
        self.stats = stats
        self.outage = outage
        self.fetch = fetch_for(self.config, wurk.redis, wurk.scripts, identity)
        self.retry = RetryHandler(wurk)
        #: The jobs running now; the heartbeat reports them.
        self.work = WorkSet()
        self.quieting = threading.Event()
        self._lock = threading.Lock()
        self.processors: list[Processor] = []

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
        )
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

    def quiet(self) -> None:
        self.quieting.set()

    def stop(self, timeout: float, hurry: threading.Event | None = None) -> int:
        """Quiet, wait up to ``timeout``, push back what is unfinished; returns how many were pushed back.

        ``hurry``, once set, ends the wait early (a second TERM). It is only polled, never
        waited on, so an OS signal handler may set it while this thread is in here.
        """
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
                self._push_back([], deadline=time.monotonic() + max(timeout, 5.0))  # leftovers, if any
            return 0
        # Let interrupted threads unwind, then push back whatever still has not finished.
        grace = time.monotonic() + 1.0
        for work in unfinished:
            work.thread.join(max(0.0, grace - time.monotonic()))
        requeue = self.work.still_unfinished(unfinished)
        self._push_back(requeue, deadline=time.monotonic() + max(timeout, 5.0))
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
