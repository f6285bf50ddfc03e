"""What a running tracked job says about itself: ``current_status().set(progress=, message=)``.

One accessor for ``@job`` functions and ``Job`` classes alike, and one that library code may
call unconditionally: outside a tracked job it returns a reporter that writes nothing.
Writes are throttled to one every ``FLUSH_EVERY`` seconds (a loop may report every item);
what is held back is written by ``flush()``, by the next allowed ``set``, or with the job's
outcome, whichever comes first.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

from django_wurk.core.features.status.record import MESSAGE_MAX, clip, write

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: At most one status write per job in this many seconds.
FLUSH_EVERY = 5.0

_running = threading.local()


class StatusReporter:
    """The progress of one tracked job, written to its status (see the module)."""

    def __init__(self, wurk: Wurk | None = None, jid: str = "") -> None:
        self.wurk = wurk
        self.jid = jid
        self._held: dict[str, str] = {}
        self._written = -math.inf

    @property
    def tracked(self) -> bool:
        """False outside a tracked job: then ``set`` and ``flush`` do nothing."""
        return self.wurk is not None

    def set(self, progress: float | None = None, message: str | None = None) -> None:
        """Report ``progress`` (a number from 0 to 100) and/or a ``message`` (text, cut to 1 KB)."""
        if progress is not None:
            if (
                isinstance(progress, bool)
                or not isinstance(progress, (int, float))
                or not 0 <= progress <= 100
            ):
                raise ValueError(f"progress must be a number from 0 to 100, got {progress!r}")
            self._held["progress"] = repr(float(progress))
        if message is not None:
            self._held["message"] = clip(str(message), MESSAGE_MAX)
        if time.monotonic() - self._written >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write what is held back now, throttle or not."""
        if self.wurk is None or not self._held:
            return
        write(self.wurk, self.jid, self._held)
        self._held = {}
        self._written = time.monotonic()

    def take(self) -> dict[str, str]:
        """What is held back, for the outcome's write (which carries it)."""
        held, self._held = self._held, {}
        return held


def current_status() -> StatusReporter:
    """The reporter of the tracked job this thread runs, or one that writes nothing."""
    reporter: StatusReporter | None = getattr(_running, "reporter", None)
    return reporter if reporter is not None else StatusReporter()


def enter(reporter: StatusReporter) -> StatusReporter | None:
    previous: StatusReporter | None = getattr(_running, "reporter", None)
    _running.reporter = reporter
    return previous


def leave(previous: StatusReporter | None) -> None:
    _running.reporter = previous
