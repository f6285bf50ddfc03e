"""The ``IterableJob`` base class: enumerate from a cursor, one step at a time, checkpointing.

What can run twice: the items done since the last checkpoint. A stop (TERM) checkpoints
before the next item, so nothing repeats; a crash (``kill -9``, a lost machine) repeats at
most ``checkpoint_interval`` seconds of items, the ones done after the last save. Each item
should therefore be safe to do twice, as every job should be.

One run, in Sidekiq 7.3/8.0's order: ``build_enumerator``; ``on_start`` (the first run) or
``on_resume`` (any later one); the cancel is read; then per item ``around_iteration`` around
``each_iteration``, with, between two items, a save every ``checkpoint_interval`` seconds
that also reads the cancel, and a save before leaving when the worker stops or the run is
past ``max_iteration_runtime``. The run ends one of three ways, each followed by ``on_stop``:
completed (``on_complete``, then the state is deleted), cancelled (``on_cancel`` first, then
as completed: Sidekiq treats a cancelled job as done), or interrupted (put back in its
queue, to resume from the saved cursor). An item that raises ends the run with no hook: the
cursor is saved and the job fails, to retry from there.
"""

from __future__ import annotations

import enum
import logging
import numbers
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
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
    An iterable job past its ``max_iteration_runtime`` raises it with ``behind=True``: it
    goes behind the jobs waiting in its queue instead.
    """


class Outcome(enum.Enum):
    """How one run's walk ended."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    STOPPING = "stopping"  # the worker stops: back at the head of the queue
    OVERTIME = "overtime"  # past max_iteration_runtime: back behind the waiting jobs


def _seconds(cls: type, name: str, *, optional: bool, positive: bool) -> None:
    value = getattr(cls, name)
    if value is None and optional:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not (value > 0 if positive else value >= 0):
        wanted = "a number of seconds above 0" if positive else "a number of seconds, 0 or more"
        raise ValueError(
            f"{cls.__qualname__}.{name} must be {wanted}{' or None' if optional else ''}, got {value!r}"
        )


class IterableJob(Job, abstract=True):
    """A job that walks ``build_enumerator`` and calls ``each_iteration`` per item.

    ``build_enumerator(*args, cursor=...)`` yields ``(item, cursor)`` pairs, where each
    ``cursor`` says where to resume once that item is done (``None`` on the first run);
    cursors must be JSON values. ``perform`` is provided: defining it is an error. The hooks
    get the job's arguments, as ``each_iteration`` does.
    """

    #: Seconds between two saves of the cursor while running (Sidekiq's is 5). The cancel
    #: is read with each save, so this is also how soon a cancel from elsewhere is seen.
    checkpoint_interval: ClassVar[float] = 5.0

    #: Seconds one run may go on before it saves its cursor and puts the job behind the
    #: others waiting in its queue, to go on later (Sidekiq 8's ``max_iteration_runtime``);
    #: ``None``, the default: no limit. A run always does at least one item.
    max_iteration_runtime: ClassVar[float | None] = None

    #: The cursor of the last item done (``None`` before the first).
    cursor: Any = None

    #: Whether this job was cancelled (``cancel()``, here or by anyone): set when seen.
    cancelled: bool = False

    #: Read by the cancel feature (``core/features/cancel``): an iterable job honours the
    #: cancel flag itself, as Sidekiq's do (at its start and with every save, running its
    #: cancel hooks and ending as done), so that feature neither ends it at its start nor
    #: stops it after a grace.
    cancels_itself: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "perform" in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} is an iterable job and must not define perform(): "
                "define build_enumerator() and each_iteration()"
            )
        _seconds(cls, "checkpoint_interval", optional=False, positive=False)
        _seconds(cls, "max_iteration_runtime", optional=True, positive=True)
        super().__init_subclass__(**kwargs)

    def build_enumerator(self, *args: Any, cursor: Any) -> Iterable[tuple[Any, Any]] | None:
        """The ``(item, cursor)`` pairs from ``cursor`` on; ``None`` skips the job (it ends done)."""
        raise NotImplementedError(f"{type(self).__qualname__} must define build_enumerator()")

    def each_iteration(self, item: Any, *args: Any) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} must define each_iteration()")

    def on_start(self, *args: Any) -> None:
        """Called on the job's first run only, before its first item."""

    def on_resume(self, *args: Any) -> None:
        """Called on every later run (after a stop, a failure, a crash), before its first item."""

    def around_iteration(self, item: Any, *args: Any) -> AbstractContextManager[object]:
        """A context manager entered around each ``each_iteration`` (timing, a transaction...).

        Override it with a ``@contextlib.contextmanager`` generator. It sees an item's error;
        if it swallows one, the item counts as done.
        """
        return nullcontext()

    def on_stop(self, *args: Any) -> None:
        """Called at the end of every run that ends without an error: completed, cancelled or
        interrupted (the worker stops, ``max_iteration_runtime``)."""

    def on_cancel(self, *args: Any) -> None:
        """Called when the run sees that the job was cancelled, before ``on_stop``."""

    def on_complete(self, *args: Any) -> None:
        """Called once, after the last item (not after each resumption), and after a cancel."""

    def cancel(self) -> int:
        """Cancel this job, as Sidekiq's ``cancel!``: it stops between two items, with
        ``on_cancel``, ``on_stop`` and ``on_complete``, and is not retried.

        From the job's own code it takes effect before the next item; for a job running
        elsewhere, at its next save (``checkpoint_interval``); for one not yet running, when
        it starts. Returns the epoch seconds of the first cancel.
        """
        self.cancelled = True
        return IterationState(_wurk.redis, self.jid).cancel()

    def perform(self, *args: Any) -> None:
        state = IterationState(_wurk.redis, self.jid)
        saved = state.load()
        saved.executions += 1
        self.cursor = saved.cursor
        self.cancelled = False
        started = time.monotonic()
        base_runtime = saved.runtime

        def checkpoint() -> bool:
            saved.cursor = self.cursor
            saved.runtime = base_runtime + (time.monotonic() - started)
            return state.save(saved)

        enumerable = self.build_enumerator(*args, cursor=self.cursor)
        if enumerable is None:
            logger.info(
                "%s %s: build_enumerator() returned None, nothing to do", type(self).__qualname__, self.jid
            )
            return
        try:
            items = iter(enumerable)
        except TypeError:
            raise TypeError(
                f"{type(self).__qualname__}.build_enumerator() must return an iterable of (item, cursor) "
                f"pairs or None, got {type(enumerable).__name__}"
            ) from None
        try:
            if saved.executions == 1:
                self.on_start(*args)
            else:
                self.on_resume(*args)
            outcome = self._walk(items, args, state, checkpoint, started)
            self.on_stop(*args)
            if outcome in (Outcome.STOPPING, Outcome.OVERTIME):
                raise Interrupted(behind=outcome is Outcome.OVERTIME)
            self.on_complete(*args)
        except Exception:
            # A failed item: its retry resumes after the last item done, not from the start.
            try:
                checkpoint()
            except Exception as exc:  # the job's own error is the one to raise; say this one
                logger.warning("could not save the cursor of failed job %s: %s", self.jid, exc)
            raise
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # a generator that stopped early: let it close its file or cursor
                close()
        state.clear()

    def _walk(
        self,
        items: Iterator[Any],
        args: tuple[Any, ...],
        state: IterationState,
        checkpoint: Callable[[], bool],
        started: float,
    ) -> Outcome:
        if state.cancelled():
            return self._cancelled(args)
        limit = self.max_iteration_runtime
        slow = _wurk.config.timeout
        saved_at = time.monotonic()
        done_one = False
        for pair in items:
            try:
                item, cursor = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"{type(self).__qualname__}.build_enumerator() must yield (item, cursor) pairs, "
                    f"got {pair!r:.100}"
                ) from None
            if self.cancelled:  # cancel() from this job's own code
                return self._cancelled(args)
            now = time.monotonic()
            leave = (
                Outcome.STOPPING
                if stopping()
                else Outcome.OVERTIME
                if limit is not None and done_one and now - started > limit
                else None
            )
            if leave is not None or now - saved_at >= self.checkpoint_interval:
                cancelled = checkpoint()
                saved_at = time.monotonic()
                if cancelled:
                    return self._cancelled(args)
            if leave is not None:
                logger.debug(
                    "%s %s: leaving (%s) at cursor %r",
                    type(self).__qualname__,
                    self.jid,
                    leave.value,
                    self.cursor,
                )
                return leave
            began = time.monotonic()
            with self.around_iteration(item, *args):
                self.each_iteration(item, *args)
            self.cursor = cursor
            done_one = True
            took = time.monotonic() - began
            if took > slow:
                logger.warning(
                    "%s %s: one item took %.2f s, more than the shutdown timeout (%s s): a stopping worker "
                    "cannot wait for it, and pushes the job back mid-item (it then runs that item again)",
                    type(self).__qualname__,
                    self.jid,
                    took,
                    slow,
                )
        if self.cancelled:  # cancel() during the last item: still the cancel it asked for
            return self._cancelled(args)
        return Outcome.COMPLETED

    def _cancelled(self, args: tuple[Any, ...]) -> Outcome:
        self.cancelled = True
        logger.info("%s %s: cancelled at cursor %r", type(self).__qualname__, self.jid, self.cursor)
        self.on_cancel(*args)
        return Outcome.CANCELLED
