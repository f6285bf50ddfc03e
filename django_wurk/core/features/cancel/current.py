"""``current_job()``: what a running job may ask about itself, ``cancelled`` above all.

``current_job().cancelled`` is read where a job can stop cleanly (between items of a loop).
Reading it costs at most one round trip to Redis every ``CHECK_EVERY`` seconds: a read in
a tight loop answers from the last look until then, and once it says True it stays True
(a cancel is never taken back), so a loop may ask on every item. A cancel is seen at most
``CHECK_EVERY`` seconds late by a job that asks, and at once when this process's watcher
saw it first (it marks the handle). Outside a job (or under the testing modes, which keep
no Redis state) it is a handle whose ``cancelled`` is always False.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django_wurk.core.features.cancel import flag

#: The most often ``cancelled`` asks Redis (seconds): a cancel is seen at most this late.
CHECK_EVERY = 0.1

_running = threading.local()


class CurrentJob:
    """The job this thread runs (see the module)."""

    def __init__(self, call: Callable[..., Any] | None = None, jid: str = "") -> None:
        #: Sends one command on the job thread's own connection (``Line.call``).
        self._call = call
        #: The job's id ("" outside a job).
        self.jid = jid
        self._cancelled = False
        self._looked = -float("inf")
        #: The job itself was told it is cancelled: if it then returns, it ended cancelled.
        self.seen = False

    @property
    def cancelled(self) -> bool:
        """True once the job is cancelled (``django_wurk.cancel(jid)``, or Ruby's ``cancel!``):
        the job should stop now and return; it then ends cancelled, not succeeded."""
        if not self._cancelled and self._call is not None:
            now = time.monotonic()
            if now - self._looked >= CHECK_EVERY:
                self._looked = now
                try:
                    self._cancelled = flag.read(self._call, self.jid)
                except Exception:  # Redis away: not known to be cancelled; the job goes on
                    self._cancelled = False
        if self._cancelled:
            self.seen = True
        return self._cancelled

    def mark(self) -> None:
        """Called by the watcher that saw the flag: the next ``cancelled`` needs no round trip."""
        self._cancelled = True


_NOTHING = CurrentJob()


def current_job() -> CurrentJob:
    """The job this thread runs, or a handle whose ``cancelled`` is always False."""
    job: CurrentJob | None = getattr(_running, "job", None)
    return job if job is not None else _NOTHING


def enter(job: CurrentJob) -> CurrentJob | None:
    previous: CurrentJob | None = getattr(_running, "job", None)
    _running.job = job
    return previous


def leave(previous: CurrentJob | None) -> None:
    _running.job = previous
