"""The launcher: one worker process's lifecycle.

Start: the first heartbeat goes out before any job is fetched (so the process is visible
in the Web UI from its first job), then the poller and the processor threads start.
Signals, from the OS or from ``<identity>-signals`` in Redis, arrive on one queue and are
acted on by the thread that called ``run()``: TSTP quiets, TERM/INT stop, TTIN dumps every
thread's stack to the log. A second TERM/INT while stopping cuts the wait for running jobs
short: they are pushed back at once, as they would be at the timeout.

Stop: a job may leave a non-daemon thread running, which would keep the interpreter from
exiting forever; ``guard_exit()`` ends such a process once the shutdown timeout and a
short grace have passed.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from redis.exceptions import RedisError

from django_wurk.core import keys
from django_wurk.core.config import DEFAULT_SHARD, ConfigError
from django_wurk.core.events import Process
from django_wurk.core.worker.heartbeat import Heartbeat
from django_wurk.core.worker.manager import Manager
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.preflight import preflight
from django_wurk.core.worker.reaper import Reaper
from django_wurk.core.worker.scheduler import Poller
from django_wurk.core.worker.service import REPLACE_ME, supervised
from django_wurk.core.worker.stats import Stats
from django_wurk.core.worker.work import WorkSets

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.launcher")

HANDLED_SIGNALS = ("TERM", "INT", "TSTP", "TTIN")
STOP_SIGNALS = ("TERM", "INT")
#: How long after the shutdown timeout threads that jobs left running may still finish.
LEFTOVER_GRACE = 2.0


class Launcher:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk
        self.config = wurk.config
        self.identity = f"{self.config.hostname}:{os.getpid()}:{os.urandom(6).hex()}"
        #: The Redis this process works: its shard's (``--shard``), which its loops report on.
        self.redis_url = self.config.shard_url(self.config.shard)
        self.outage = Outage(self.redis_url)
        self.stats = Stats()
        #: One manager per capsule (``WURK["CAPSULES"]``), each with its own threads, queues and
        #: private lists; without capsules, the one ``default`` manager.
        self.managers = [
            Manager(wurk, self.stats, self.outage, self.identity, self.config.for_capsule(c), c.name)
            for c in self.config.capsule_list()
        ]
        #: The first capsule's manager (the only one without capsules).
        self.manager = self.managers[0]
        self.reaper = Reaper(wurk, self.identity, self.outage) if self.config.fetch == "reliable" else None
        self.poller = Poller(wurk, self.outage)
        self.heartbeat = Heartbeat(
            wurk,
            self.identity,
            WorkSets([m.work for m in self.managers]),
            self.stats,
            self.outage,
            self.signal,
            threads=self.live_threads,
            after_beat=lambda: self.wurk.events.fire("heartbeat", self.process),
        )
        #: True under ``runwurk -P N`` with reliable fetch: the supervisor replaces this process
        #: when it exits, and the jobs it was running are recovered. With basic fetch they
        #: would be lost with it, so such a process never offers to be replaced.
        self.supervised = supervised() and self.config.fetch == "reliable"
        #: What the lifecycle events are about (``core/events.py``); features start their
        #: threads at ``startup`` and this process stops them (``Process.stop``) as it stops.
        self.process = Process(wurk, self.identity, self.outage, control=self)
        # SimpleQueue, not Queue: put() must be reentrant because the OS signal handler calls it
        # in the main thread, possibly while that thread is inside get().
        self.signals: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.stopped = threading.Event()
        #: Set by a second TERM/INT during the stop. The main thread only polls it, never
        #: waits on it, so the OS signal handler (which runs in that thread) can always set it.
        self.hurry = threading.Event()
        self._stop_began: float | None = None
        self._started = False

    # Lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start every thread; a Redis that can never take this worker raises ``ConfigError``
        first, naming the setting (see ``worker.preflight``), and nothing is started."""
        refused = preflight(self.wurk.redis.ping, self.redis_url)
        if refused is not None:
            setting = "REDIS_URL" if self.config.shard == DEFAULT_SHARD else "SHARDS"
            raise ConfigError(setting, refused)
        for m in self.managers:
            logger.info(
                "starting %s%s: concurrency %d, queues %s",
                self.identity,
                f" capsule {m.name}" if self.config.capsules else "",
                m.config.concurrency,
                ", ".join(f"{q.name},{q.weight}" if q.weight else q.name for q in m.config.queues),
            )
        self.heartbeat.beat()
        self.heartbeat.start()
        if self.reaper is not None:
            # Sweep before fetching: jobs of processes that died are older than anything new.
            self._reap_once()
            self.reaper.start()
        self.poller.start()
        self._started = True
        # Before any job is fetched, as Sidekiq's :startup: a feature's thread (the timeouts'
        # watchdog) is there for the first job, and one that cannot start (a health port in
        # use) stops the process instead of leaving it to run without it.
        self.wurk.events.fire("startup", self.process, strict=True)
        for manager in self.managers:
            manager.start()

    def _reap_once(self) -> None:
        assert self.reaper is not None
        try:
            self.reaper.reap()
        except Exception as exc:  # a failed sweep must not stop the worker from starting
            logger.warning("start-up sweep for dead processes' jobs failed: %s", exc)

    def quiet(self) -> None:
        if all(m.quieting.is_set() for m in self.managers):
            return
        logger.info("quieting: no new jobs will be fetched")
        for manager in self.managers:
            manager.quiet()
        self.heartbeat.quiet = True
        self.wurk.events.fire("quiet", self.process)

    def stop(self) -> None:
        """Drain within the timeout, push back what is left, leave the process set."""
        if self.stopped.is_set():
            return
        if self._stop_began is None:
            self._stop_began = time.monotonic()
        self._hurry_if_stop_signal_queued()
        logger.info("shutting down; waiting up to %.0f s for running jobs", self.config.timeout)
        self.heartbeat.quiet = True
        if self._started:
            self.quiet()
            self._stop_process()
            pushed_back = self._stop_managers()
            if self.hurry.is_set():
                logger.warning("second stop signal: not waiting any longer for running jobs")
            if pushed_back:
                logger.warning("pushed %d unfinished job(s) back to their queues", pushed_back)
            self.poller.stop()
            if self.reaper is not None:
                self.reaper.stop()
        self.heartbeat.stop()
        self.stopped.set()
        logger.info("stopped %s", self.identity)

    def _stop_managers(self) -> int:
        """Stop every capsule within one shutdown timeout; how many jobs were pushed back.

        All capsules are quieted first, so none fetches while another is being waited for,
        and the timeout is shared: a shutdown never takes longer for having capsules.
        """
        for manager in self.managers:
            manager.stopping.set()
            manager.quiet()
        deadline = time.monotonic() + self.config.timeout
        return sum(
            manager.stop(max(0.0, deadline - time.monotonic()), self.hurry) for manager in self.managers
        )

    def replace_dead_threads(self) -> None:
        """Every capsule's processor threads that ended unseen are replaced (``Manager.replace_dead``)."""
        for manager in self.managers:
            try:
                manager.replace_dead()
            except Exception:  # the supervising loop must outlive its own trouble
                logger.exception("could not replace a dead processor thread")

    def live_threads(self) -> int:
        """Processor threads running in every capsule: the heartbeat's ``threads``."""
        return sum(m.live_threads() for m in self.managers)

    # JobControl (what event listeners may do, see ``worker.service``) --------------------

    def abandon(
        self, thread: threading.Thread, job: object, failure: BaseException, *, replace: bool = True
    ) -> bool:
        """Give up on ``thread``'s job through the capsule whose processor runs it (see ``JobControl``).

        Each capsule's manager knows only its own running jobs, so the first that finds the
        thread settles it; the others return False without touching anything.
        """
        if not any(manager.abandon(thread, job, failure, replace=replace) for manager in self.managers):
            return False
        if not replace:  # the process is about to be replaced: no capsule takes another job
            for manager in self.managers:
                manager.quiet()
        return True

    def replace_process(self, reason: str) -> NoReturn:
        """Leave the process set and exit soon, stuck threads and all (see ``JobControl``).

        The process hash goes too, so the next reaper pass (the replacement's start-up
        sweep) sees this process dead at once and recovers its private lists, instead of
        waiting ``PROCESS_DEAD_AFTER`` for the heartbeat to age.
        """
        logger.error("replacing worker process %s: %s", self.identity, reason)
        # Threads that just recorded an outcome acknowledge it on their way out: let them.
        deadline = time.monotonic() + self.config.fetch_timeout + 1.0
        for manager in self.managers:
            manager.wait_for_idle_threads(deadline)
        try:
            pipe = self.wurk.redis.pipeline(transaction=True)
            pipe.srem(keys.PROCESSES, self.identity)
            pipe.unlink(self.identity, keys.work(self.identity), keys.legacy_workers(self.identity))
            pipe.execute()
        except RedisError as exc:  # recovery then waits for the heartbeat to age: slower, still sure
            logger.error("could not deregister %s before exiting: %s", self.identity, exc)
        logging.shutdown()
        os._exit(REPLACE_ME)

    def _stop_process(self) -> None:
        """``shutdown``, then what the features started stops (a leader hands over at once,
        before the running jobs are waited for)."""
        self.wurk.events.fire("shutdown", self.process)
        self.process.stop()

    def _hurry_if_stop_signal_queued(self) -> None:
        """A TERM/INT that came before the stop began, after the one that started it."""
        while True:
            try:
                name = self.signals.get_nowait()
            except queue.Empty:
                return
            if name in STOP_SIGNALS:
                self.hurry.set()

    def guard_exit(self) -> None:
        """See that the process ends after the stop even if jobs left threads running.

        For the process's owner (``runwurk``), once the worker has stopped: the interpreter
        joins every non-daemon thread before it exits, so one a job left behind would keep
        the process alive forever, deaf to further signals. A daemon thread waits until the
        shutdown timeout (counted from when the stop began) plus ``LEFTOVER_GRACE``, or a
        second TERM/INT; if such threads are still running then, it names them in the log,
        runs the exit handlers the interpreter would have run, and ends the process with
        status 0 (the worker itself stopped cleanly). A process that exits first takes the
        daemon thread with it.
        """
        began = self._stop_began if self._stop_began is not None else time.monotonic()
        deadline = began + self.config.timeout + LEFTOVER_GRACE

        def watch() -> None:
            self.hurry.wait(max(0.0, deadline - time.monotonic()))
            main = threading.main_thread()
            left = [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]
            if not left:
                return  # the interpreter is past joining threads: let it finish its exit
            logger.error(
                "%d non-daemon thread(s) still running %.1f s after the stop began%s, most likely "
                "started by a job: %s; exiting without waiting for them",
                len(left),
                time.monotonic() - began,
                " (second stop signal)" if self.hurry.is_set() else "",
                ", ".join(repr(t.name) for t in left),
            )
            try:
                atexit._run_exitfuncs()  # what a normal exit would run after joining threads
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)

        threading.Thread(target=watch, name="wurk-exit-guard", daemon=True).start()

    def run(self, handle_os_signals: bool = True) -> None:
        """Start, act on signals until told to stop, then stop. Blocks."""
        if handle_os_signals:
            self.install_signal_handlers()
        try:
            self.start()
            while True:
                try:
                    # A timeout keeps the main thread returning to the interpreter, where
                    # Python runs OS signal handlers.
                    name = self.signals.get(timeout=1.0)
                except queue.Empty:
                    self.replace_dead_threads()
                    continue
                if name in STOP_SIGNALS:
                    break
                self.handle(name)
        finally:
            self.stop()

    # Signals -------------------------------------------------------------------------

    def signal(self, name: str) -> None:
        """Deliver a signal by name (from the OS handler, Redis, or a test)."""
        name = name.upper().removeprefix("SIG")
        if name in STOP_SIGNALS and self._stop_began is not None:
            self.hurry.set()  # nothing reads the queue any more: the stop is under way
        self.signals.put(name)

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
