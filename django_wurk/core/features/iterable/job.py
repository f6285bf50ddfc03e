"""The ``IterableJob`` base class: enumerate from a cursor, one step at a time, checkpointing.

What can run twice: the items done since the last checkpoint. A stop (TERM) checkpoints
before the next item, so nothing repeats; a crash (``kill -9``, a lost machine) repeats at
most ``checkpoint_interval`` seconds of items, the ones done after the last save. Each item
should therefore be safe to do twice, as every job should be.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, ClassVar

from django_wurk.core.control import PutBack, stopping
from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.iterable.state import IterationState
from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.iterable")


class Interrupted(PutBack):
    """Raised by a job that stops early because the worker is stopping (``stopping()``).

    The job has saved where it got to (an iterable job's cursor); the worker puts it back at
    the head of its queue as it was fetched, so it resumes next, here or elsewhere. It is
    not a failure: no retry is counted and no error is reported (``core/control.PutBack``).
    """


class IterableJob(Job, abstract=True):
    """A job that walks ``build_enumerator`` and calls ``each_iteration`` per item.

    ``build_enumerator(*args, cursor=...)`` yields ``(item, cursor)`` pairs, where each
    ``cursor`` says where to resume once that item is done (``None`` on the first run);
    cursors must be JSON values. ``perform`` is provided: do not override it.
    """

    #: Seconds between two saves of the cursor while running (Sidekiq's is 5).
    checkpoint_interval: ClassVar[float] = 5.0

    #: The cursor of the last item done (``None`` before the first).
    cursor: Any = None

    def build_enumerator(self, *args: Any, cursor: Any) -> Iterable[tuple[Any, Any]]:
        raise NotImplementedError(f"{type(self).__qualname__} must define build_enumerator()")

    def each_iteration(self, item: Any, *args: Any) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} must define each_iteration()")

    def on_complete(self, *args: Any) -> None:
        """Called once, after the last item (not after each resumption)."""

    def perform(self, *args: Any) -> None:
        state = IterationState(_wurk.redis, self.jid)
        saved = state.load()
        saved.executions += 1
        self.cursor = saved.cursor
        started = last_save = time.monotonic()
        base_runtime = saved.runtime

        def checkpoint() -> None:
            saved.cursor = self.cursor
            saved.runtime = base_runtime + (time.monotonic() - started)
            state.save(saved)

        try:
            for item, cursor in self.build_enumerator(*args, cursor=self.cursor):
                if stopping():
                    checkpoint()
                    raise Interrupted()
                self.each_iteration(item, *args)
                self.cursor = cursor
                if time.monotonic() - last_save >= self.checkpoint_interval:
                    checkpoint()
                    last_save = time.monotonic()
        except Exception:
            # A failed item: its retry resumes after the last item done, not from the start.
            try:
                checkpoint()
            except Exception as exc:  # the job's own error is the one to raise; say this one
                logger.warning("could not save the cursor of failed job %s: %s", self.jid, exc)
            raise
        self.on_complete(*args)
        state.clear()
