"""The watcher: sees a running job's cancel flag, and stops the job after its grace.

One thread per worker process (started at ``startup``). Every ``LOOK_EVERY`` seconds it reads
the cancels made since its last look into ``flag.Recent`` (which the job starts check), and,
while jobs run, the flags of all of them in one round trip. A job found cancelled is
told so (its ``current_job()`` handle is marked: the job's next look costs nothing) and is
given ``CANCEL_GRACE`` seconds to stop by itself. Then the timeouts' watchdog stops it as it
stops a job past its timeout (``Deadlines.cut``): ``Cancelled`` is raised in its thread,
and if that does not land (blocked in C code or a socket) the job is given up on, recorded
as cancelled (``finder.settle``) and acknowledged, its thread left behind or its process
replaced. Without the timeouts feature a job that does not cooperate runs to its end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.control import Cancelled
from django_wurk.core.features.cancel import flag
from django_wurk.core.features.cancel.middleware import Entry, RunningJobs

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.cancel")

#: How often the watcher reads the flags of the running jobs (seconds).
LOOK_EVERY = 0.25
#: At most one warning this often (seconds) while the cancels cannot be read.
REPORT_EVERY = 60.0


class Watcher:
    def __init__(
        self,
        wurk: Wurk,
        running: RunningJobs,
        deadlines: Callable[[], Any],
        grace: float,
        settle: Callable[[Wurk, wire.Payload], None],
        recent: flag.Recent,
    ) -> None:
        self.wurk = wurk
        self.running = running
        self.deadlines = deadlines
        self.grace = grace
        self.settle = settle
        self.recent = recent
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="wurk-cancel-watcher", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5)

    def run(self) -> None:
        told_at = -REPORT_EVERY
        while True:
            # First at once: a job fetched as the process starts meets today's cancels.
            for step in (self._refresh, self.look):
                try:
                    step()
                except Exception as exc:  # an outage or a bad key: look again next time
                    if time.monotonic() - told_at >= REPORT_EVERY:
                        told_at = time.monotonic()
                        logger.warning("cancel watcher: could not read the cancels (%s)", exc)
            if self.stopping.wait(LOOK_EVERY):
                return

    def _refresh(self) -> None:
        self.recent.refresh(self.wurk.redis)

    def look(self) -> None:
        entries = [e for e in self.running.snapshot() if e.noticed is None]
        if not entries:
            return
        for entry, cancelled in zip(
            entries, flag.which_set(self.wurk.redis, [e.jid for e in entries]), strict=True
        ):
            if cancelled:
                self.notice(entry)

    def notice(self, entry: Entry) -> None:
        """``entry`` is cancelled: tell the job, and have it stopped after the grace."""
        deadlines = self.deadlines()
        with self.running.lock:
            if entry.left or entry.noticed is not None:
                return
            entry.noticed = time.monotonic()
            entry.handle.mark()
            logger.info(
                "job %r (%s) is cancelled: it has %g s to stop", entry.jid,
                wire.job_display_class(entry.payload), self.grace,
            )  # fmt: skip
            if deadlines is None:
                logger.warning(
                    "job %r is cancelled but the timeouts feature is not used: it is not stopped "
                    "if it does not stop by itself", entry.jid,
                )  # fmt: skip
                return
            entry.cut = deadlines.cut(
                entry.thread, entry.job, entry.payload, self.grace, Cancelled, "it was cancelled",
                on_abandon=lambda: self.given_up(entry),
            )  # fmt: skip

    def given_up(self, entry: Entry) -> None:
        """The job did not stop (blocked outside Python) and was acknowledged for it: record
        it as cancelled now, once (its thread, if it ever returns, records nothing more)."""
        entry.settled = True
        self.settle(self.wurk, entry.payload)
