"""The swarm: one supervisor process and N forked worker processes.

``runwurk -P N`` sets Django up once, then forks N children; each runs an ordinary worker
(its own identity, heartbeat, threads and Redis pool). The supervisor runs no jobs. It
replaces a child that dies (backing off if children keep dying at start-up), recycles a
child whose memory passes ``--max-memory-mb`` (TERM, so it drains like any stop),
forwards TERM/INT (stop), TSTP (quiet) and TTIN (thread dump) to every child, and on USR1
replaces the children one at a time — a rolling restart that never leaves the pool empty.

Fork safety: whatever a child must not share with its parent (database connections, the
Redis pool) is closed by the ``before_fork``/``after_fork`` callbacks; redis-py pools also
notice the new pid on their own.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from django_wurk.core.worker.service import CANNOT_START, REPLACE_ME, mark_supervised

logger = logging.getLogger("django_wurk.swarm")

FORWARDED = {"TSTP": signal.SIGTSTP, "TTIN": signal.SIGTTIN}
#: Signals the supervisor acts on; a child resets them to the default before it runs.
SUPERVISED = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGUSR1, signal.SIGCHLD)


@dataclass
class Child:
    index: int
    pid: int
    started: float = field(default_factory=time.monotonic)
    stopping: bool = False


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Swarm:
    def __init__(
        self,
        processes: int,
        run_child: Callable[[int], int],
        *,
        before_fork: Callable[[], None] = lambda: None,
        after_fork: Callable[[], None] = lambda: None,
        max_memory_mb: float | None = None,
        shutdown_timeout: float = 25.0,
        check_interval: float = 1.0,
        on_child_exit: Callable[[int], None] = lambda pid: None,
    ) -> None:
        self.processes = processes
        self.run_child = run_child
        self.before_fork = before_fork
        self.after_fork = after_fork
        self.max_memory_mb = max_memory_mb
        self.shutdown_timeout = shutdown_timeout
        self.check_interval = check_interval
        #: Told each child's pid once it has exited (multi-process metrics drop its live gauges).
        self.on_child_exit = on_child_exit
        self.children: dict[int, Child] = {}
        self.signals: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.stopping = False
        self._failures: list[float] = []

    # Children ------------------------------------------------------------------------

    def spawn(self, index: int) -> Child:
        self.before_fork()
        pid = os.fork()
        if pid == 0:  # the child
            for sig in SUPERVISED:
                signal.signal(sig, signal.SIG_DFL)
            code = 1
            mark_supervised()
            try:
                self.after_fork()
                code = self.run_child(index)
            except BaseException:
                logger.exception("worker process %d crashed", os.getpid())
            finally:
                logging.shutdown()
                os._exit(code)
        child = Child(index, pid)
        self.children[pid] = child
        logger.info("started worker process %d (slot %d)", pid, index)
        return child

    def reap(self) -> list[tuple[Child, int]]:
        """Collect exited children without blocking: (child, exit status)."""
        gone = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is not None:
                self.on_child_exit(pid)
                gone.append((child, os.waitstatus_to_exitcode(status)))
        return gone

    # Signals -------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.signals.put(signal.Signals(signum).name.removeprefix("SIG"))

        for sig in SUPERVISED:
            signal.signal(sig, handler)

    def tell_children(self, sig: signal.Signals) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    # The loop ------------------------------------------------------------------------

    def run(self) -> int:
        self.install_signal_handlers()
        logger.info("supervisor %d starting %d worker processes", os.getpid(), self.processes)
        for index in range(self.processes):
            self.spawn(index)
        while True:
            try:
                name = self.signals.get(timeout=self.check_interval)
            except queue.Empty:
                name = ""
            if name in ("TERM", "INT"):
                return self.shutdown()
            if name in FORWARDED:
                self.tell_children(FORWARDED[name])
            elif name == "USR1":
                self.rolling_restart()
            if not self.replace_dead():
                return self.shutdown(CANNOT_START)
            self.recycle_bloated()

    def replace_dead(self) -> bool:
        """Start a process in each dead one's place; False, starting no more, once one could not
        start for a reason its replacement would meet too (``CANNOT_START``)."""
        for child, code in self.reap():
            if code == CANNOT_START and not child.stopping:
                logger.error(
                    "worker process %d (slot %d) cannot start as configured (its error is above);"
                    " stopping the other worker processes and exiting",
                    child.pid,
                    child.index,
                )
                return False
            if child.stopping:
                logger.info("worker process %d (slot %d) exited (%s)", child.pid, child.index, code)
            elif code == REPLACE_ME:
                # It asked for it (a job it could not stop, see worker.service): not a crash.
                logger.warning("worker process %d (slot %d) asked to be replaced", child.pid, child.index)
            else:
                logger.error(
                    "worker process %d (slot %d) died (exit %s); replacing it", child.pid, child.index, code
                )
                self._backoff_if_crash_looping()
            if not self.stopping:
                self.spawn(child.index)
        return True

    def _backoff_if_crash_looping(self) -> None:
        now = time.monotonic()
        self._failures = [t for t in self._failures if now - t < 60] + [now]
        if len(self._failures) > 2 * self.processes:
            delay = min(2 ** (len(self._failures) - 2 * self.processes), 30)
            logger.error("worker processes keep dying; waiting %d s before the next start", delay)
            time.sleep(delay)

    def recycle_bloated(self) -> None:
        if not self.max_memory_mb:
            return
        for child in list(self.children.values()):
            if child.stopping:
                continue
            used = rss_mb(child.pid)
            if used > self.max_memory_mb:
                logger.warning(
                    "worker process %d uses %.0f MB (ceiling %.0f MB); recycling it",
                    child.pid,
                    used,
                    self.max_memory_mb,
                )
                self._stop_child(child)

    def _stop_child(self, child: Child) -> None:
        child.stopping = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)

    def rolling_restart(self) -> None:
        """Replace each child in turn: stop one, wait for it, start its replacement."""
        logger.info("rolling restart of %d worker processes", len(self.children))
        for child in list(self.children.values()):
            self._stop_child(child)
            self._wait_for(child, self.shutdown_timeout + 10)
            self.children.pop(child.pid, None)
            self.on_child_exit(child.pid)
            if self.stopping:
                return
            self.spawn(child.index)

    def _wait_for(self, child: Child, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == child.pid:
                return
            time.sleep(0.05)
        logger.error("worker process %d did not stop in %.0f s; killing it", child.pid, timeout)
        try:
            os.kill(child.pid, signal.SIGKILL)
            os.waitpid(child.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def shutdown(self, status: int = 0) -> int:
        """Stop every child (TERM, then KILL past the timeout); returns ``status``, the exit status."""
        self.stopping = True
        logger.info("supervisor stopping %d worker processes", len(self.children))
        for child in self.children.values():
            child.stopping = True
        self.tell_children(signal.SIGTERM)
        deadline = time.monotonic() + self.shutdown_timeout + 10
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in list(self.children):
            logger.error("worker process %d did not stop in time; killing it", pid)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError as exc:
                if exc.errno not in (errno.ESRCH, errno.ECHILD):
                    raise
        self.children.clear()
        logger.info("supervisor stopped")
        return status
