"""The launcher: one worker process's lifecycle.

Start: the first heartbeat goes out before any job is fetched (so the process is visible
in the Web UI from its first job), then the poller and the processor threads start.
Signals, from the OS or from ``<identity>-signals`` in Redis, arrive on one queue and are
acted on by the thread that called ``run()``: TSTP quiets, TERM/INT stop, TTIN dumps every
thread's stack to the log.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import TYPE_CHECKING

from django_wurk.core.worker.heartbeat import Heartbeat
from django_wurk.core.worker.manager import Manager
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.reaper import Reaper
from django_wurk.core.worker.scheduler import Poller
from django_wurk.core.worker.stats import Stats

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.launcher")

HANDLED_SIGNALS = ("TERM", "INT", "TSTP", "TTIN")


class Launcher:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk
        self.config = wurk.config
        self.identity = f"{self.config.hostname}:{os.getpid()}:{os.urandom(6).hex()}"
        self.outage = Outage(self.config.redis_url)
        self.stats = Stats()
        self.manager = Manager(wurk, self.stats, self.outage, self.identity)
        self.reaper = Reaper(wurk, self.identity, self.outage) if self.config.fetch == "reliable" else None
        self.poller = Poller(wurk, self.outage)
        self.heartbeat = Heartbeat(wurk, self.identity, self.manager, self.stats, self.outage, self.signal)
        # SimpleQueue, not Queue: put() must be reentrant because the OS signal handler calls it
        # in the main thread, possibly while that thread is inside get().
        self.signals: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.stopped = threading.Event()
        self._started = False

    # Lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        logger.info(
            "starting %s: concurrency %d, queues %s",
            self.identity,
            self.config.concurrency,
            ", ".join(f"{q.name},{q.weight}" if q.weight else q.name for q in self.config.queues),
        )
        self.heartbeat.beat()
        self.heartbeat.start()
        if self.reaper is not None:
            # Sweep before fetching: jobs of processes that died are older than anything new.
            self._reap_once()
            self.reaper.start()
        self.poller.start()
        self.manager.start()
        self._started = True

    def _reap_once(self) -> None:
        assert self.reaper is not None
        try:
            self.reaper.reap()
        except Exception as exc:  # a failed sweep must not stop the worker from starting
            logger.warning("start-up sweep for dead processes' jobs failed: %s", exc)

    def quiet(self) -> None:
        if self.manager.quieting.is_set():
            return
        logger.info("quieting: no new jobs will be fetched")
        self.manager.quiet()
        self.heartbeat.quiet = True

    def stop(self) -> None:
        """Drain within the timeout, push back what is left, leave the process set."""
        if self.stopped.is_set():
            return
        logger.info("shutting down; waiting up to %.0f s for running jobs", self.config.timeout)
        self.heartbeat.quiet = True
        if self._started:
            pushed_back = self.manager.stop(self.config.timeout)
            if pushed_back:
                logger.warning("pushed %d unfinished job(s) back to their queues", pushed_back)
            self.poller.stop()
            if self.reaper is not None:
                self.reaper.stop()
        self.heartbeat.stop()
        self.stopped.set()
        logger.info("stopped %s", self.identity)

    def run(self, handle_os_signals: bool = True) -> None:
        """Start, act on signals until told to stop, then stop. Blocks."""
        if handle_os_signals:
            self.install_signal_handlers()
        self.start()
        try:
            while True:
                try:
                    # A timeout keeps the main thread returning to the interpreter, where
                    # Python runs OS signal handlers.
                    name = self.signals.get(timeout=1.0)
                except queue.Empty:
                    continue
                if name in ("TERM", "INT"):
                    break
                self.handle(name)
        finally:
            self.stop()

    # Signals -------------------------------------------------------------------------

    def signal(self, name: str) -> None:
        """Deliver a signal by name (from the OS handler, Redis, or a test)."""
        self.signals.put(name.upper().removeprefix("SIG"))

    def handle(self, name: str) -> None:
        if name == "TSTP":
            self.quiet()
        elif name == "TTIN":
            self.dump_threads()
        else:
            logger.warning("ignoring unknown signal %r", name)

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.signal(signal.Signals(signum).name)

        for name in HANDLED_SIGNALS:
            sig = getattr(signal, f"SIG{name}", None)
            if sig is not None:
                signal.signal(sig, handler)

    def dump_threads(self) -> None:
        frames = sys._current_frames()
        for thread in threading.enumerate():
            frame = frames.get(thread.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame else "  (no frame)\n"
            logger.warning("thread %s (%s):\n%s", thread.name, thread.ident, stack)
        logger.warning("thread dump done at %s", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
