"""A backlog: writes that could not reach Redis, kept and retried in order until they do.

Three parts of the client keep writes for later: the outage buffer (``CLIENT_BUFFER``:
pushes made while Redis is down), pushes made after a database commit while Redis was
down, and batch writes after a commit. Each needs the same things, which this module owns
once, so none of them writes its own thread, back-off, fork hook or exit hook:

* **order**: one thread retries the oldest write first; a new write joins the end while
  older ones wait (``busy()``), so a later push never overtakes an earlier one;
* **back-off**: ``first_delay`` seconds, doubling to at most ``max_delay``, for
  ``attempts()`` tries (``None``: until it works). An error that is not an outage (not
  ``RedisError``/``OSError``) would fail the same way every time, so that write is given up
  at once, never retried forever, and the writes behind it go on;
* **a bound**: past ``limit()`` (counted in ``size(item)``, e.g. jobs) a new item is refused
  (``BacklogFull``), and nothing already kept is dropped;
* **fork**: a forked child starts with an empty backlog and no thread: its parent keeps
  retrying its own writes, which the child must not write a second time;
* **exit**: at interpreter exit the back-off is cut short, what waits gets one more try for
  at most ``exit_within()`` seconds, and the rest goes to ``on_lost``, never silently away
  with the daemon thread.

``on_lost(item, error, fate)`` is told of every write that will not be made, with the last
error it met and why it was given up (``Fate``). The writes themselves, what "lost" means
to the caller (a log line with the payloads, a signal) and how many attempts are allowed
belong to the caller.

Some writes cannot be kept for later: the caller must not go on before they are made (a
worker acknowledges a job only once its outcome is recorded, so a crash in between runs the
job again instead of losing the record). Those wait in the calling thread, with
``ride_out``, the same back-off until a deadline: the worker's writes
(``worker/outage.Outage.ride_out``) and a batch job's count (``features/batches``).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from redis.exceptions import RedisError

logger = logging.getLogger("django_wurk.backlog")

T = TypeVar("T")
R = TypeVar("R")

#: Why a write was given up: its attempts ran out (``exhausted``), it met an error that is
#: not an outage (``failed``), the process exited before it could be written (``exiting``),
#: or while it was being written, so it may have reached Redis (``under_way``).
Fate = Literal["exhausted", "failed", "exiting", "under_way"]

FIRST_DELAY = 0.5
#: The longest wait between two attempts.
MAX_DELAY = 30.0


class BacklogFull(Exception):
    """The backlog is at its ``limit()``: this item was refused, the others are kept."""


def delay(attempt: int, first: float = FIRST_DELAY, most: float = MAX_DELAY) -> float:
    """The wait before attempt ``attempt`` (1 is the first retry)."""
    return float(min(first * 2.0 ** (attempt - 1), most))


def ride_out(
    action: Callable[[], R],
    deadline: float,
    on_give_up: Callable[[BaseException], R],
    *,
    transient: tuple[type[BaseException], ...] = (RedisError, OSError),
    permanent: tuple[type[BaseException], ...] = (),
    pause: Callable[[int], float] = lambda failures: delay(failures, 0.1, 2.0),
    failed: Callable[[BaseException], None] | None = None,
    recovered: Callable[[], None] | None = None,
) -> R:
    """``action()``, tried again in this thread while it meets a ``transient`` error (one
    of ``permanent`` is raised at once), until ``deadline`` (``time.monotonic()``).

    ``pause(failures)`` is the wait after the ``failures``-th failure; ``failed`` hears of each
    failure and ``recovered`` of a success after some. Once an attempt fails after the
    deadline, ``on_give_up`` gets the last error and its result is returned: the caller
    says what is lost. Any other exception is raised at once: trying again would fail the
    same way.
    """
    failures = 0
    while True:
        try:
            result = action()
        except transient as exc:
            if isinstance(exc, permanent):
                raise
            failures += 1
            if failed is not None:
                failed(exc)
            if time.monotonic() > deadline:
                return on_give_up(exc)
            time.sleep(pause(failures))
            continue
        if failures and recovered is not None:
            recovered()
        return result


class Backlog(Generic[T]):
    """Items kept for ``write``, retried in order by one thread (see the module)."""

    def __init__(
        self,
        name: str,
        write: Callable[[T], object],
        on_lost: Callable[[T, BaseException, Fate], None],
        *,
        attempts: Callable[[], int | None] = lambda: None,
        limit: Callable[[], int | None] = lambda: None,
        size: Callable[[T], int] = lambda item: 1,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        exit_within: Callable[[], float] = lambda: 10.0,
        on_written: Callable[[T, int], None] | None = None,
    ) -> None:
        """``on_written(item, attempt)`` runs after a write that worked on a retry."""
        self.name = name
        self._write = write
        self._on_lost = on_lost
        self._on_written = on_written
        #: How many tries a write gets (read when its retries start; assignable).
        self.attempts = attempts
        self.limit = limit
        self._size_of = size
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.exit_within = exit_within
        self._reset()
        _every.add(self)

    def _reset(self) -> None:
        # Also the child's state right after a fork, where another thread may have held the lock.
        self._changed = threading.Condition()
        #: Waiting items, oldest first, each with the latest error it met (``None``: none yet).
        self._items: deque[tuple[T, BaseException | None]] = deque()
        #: The item the thread is writing now (taken off ``_items``), if any.
        self._inflight: tuple[T, BaseException | None] | None = None
        #: How much waits: ``size(item)`` (at least 1 each) summed over the items waiting and
        #: in flight, so it is 0 exactly when nothing waits. Read it, never set it: a plain
        #: attribute so that a caller on a hot path (every push) asks without a call.
        self.size = 0
        #: Items given up whose ``on_lost`` is still running.
        self._reporting = 0
        self._thread: threading.Thread | None = None
        self._exiting = threading.Event()
        #: Set once the exit flush took over; nothing is retried after.
        self._closed = False

    def busy(self) -> bool:
        """Whether anything waits: a new write must then join the end, to keep the order."""
        return self.size > 0

    def submit(self, item: T, error: BaseException | None = None) -> None:
        """Keep ``item`` (which failed with ``error``, if it was tried) for the thread to write.

        Raises ``BacklogFull`` past ``limit()``; during the exit itself it is lost at once.
        """
        weight = max(self._size_of(item), 1)
        with self._changed:
            closed = self._closed
            if not closed:
                bound = self.limit()
                if bound is not None and self.size + weight > bound:
                    raise BacklogFull(f"{self.name}: {self.size} waiting already, the limit is {bound}")
                self._items.append((item, error))
                self.size += weight
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=f"wurk-{self.name}", daemon=True)
                    self._thread.start()
                self._changed.notify_all()
        if closed:  # nobody is left to retry it
            self._lost(item, error or RuntimeError("the process is exiting"), "exiting")

    def _run(self) -> None:
        while True:
            with self._changed:
                # Decided and recorded under the lock a submit reads: a thread on its way out
                # is already no thread, so a new item starts one.
                if not self._items or self._closed:
                    self._thread = None
                    self._changed.notify_all()
                    return
                entry = self._inflight = self._items.popleft()
            item, error = entry
            written, error, fate = self._retry(item, error)
            with self._changed:
                self._inflight = None
                closed = self._closed  # the exit flush has reported this item already
                if not closed:
                    self.size -= max(self._size_of(item), 1)
                    if not written:  # counted until told, so the exit flush waits for the report
                        self._reporting += 1
                self._changed.notify_all()
            if closed:
                if written:
                    logger.warning("%s: a write reported lost at exit reached Redis after all", self.name)
            elif not written:
                assert error is not None
                try:
                    self._lost(item, error, fate)
                finally:
                    with self._changed:
                        self._reporting -= 1
                        self._changed.notify_all()

    def _retry(self, item: T, error: BaseException | None) -> tuple[bool, BaseException | None, Fate]:
        """Write ``item`` with back-off until it works or the attempts run out; once the
        process exits, with one last attempt and no more waiting."""
        allowed = self.attempts()
        attempt = 0
        while allowed is None or attempt < allowed or self._exiting.is_set():
            attempt += 1
            exiting = self._exiting.is_set() or self._exiting.wait(
                delay(attempt, self.first_delay, self.max_delay)
            )
            try:
                self._write(item)
            except (RedisError, OSError) as exc:
                if exiting:
                    return False, exc, "exiting"
                error = exc
                continue
            except Exception as exc:  # it would fail the same way every time
                return False, exc, "failed"
            if self._on_written is not None:
                try:
                    self._on_written(item, attempt)
                except Exception:
                    logger.exception("%s: reporting a write failed", self.name)
            return True, None, "exhausted"
        return False, error or RuntimeError("no attempt was allowed"), "exhausted"

    def _lost(self, item: T, error: BaseException, fate: Fate) -> None:
        try:
            self._on_lost(item, error, fate)
        except Exception:  # a failing report must not hide the next item's
            logger.exception("%s: reporting a lost write failed", self.name)

    def flush_at_exit(self) -> None:
        """Cut the back-off short: the thread gives what waits one last try each, for at most
        ``exit_within()`` seconds in all; what it did not reach is then lost.

        The tries are the thread's, not this caller's: a write to a Redis that accepts
        connections and never answers blocks for the socket timeout, and the exit must not.
        """
        deadline = time.monotonic() + self.exit_within()
        with self._changed:
            if self._closed:
                return
            self._exiting.set()  # wakes the thread out of its back-off
            self._changed.notify_all()
            while (self.busy() and self._thread is not None) or self._reporting:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            under_way = self._inflight
            waiting = list(self._items)
            self._closed = True
            self._items.clear()
            self.size = 0
        if under_way is not None:
            item, error = under_way
            error = error or TimeoutError("the process exited while it was being written")
            self._lost(item, error, "under_way")
        for item, error in waiting:
            self._lost(
                item, error or TimeoutError("the process exited before it could be written"), "exiting"
            )


#: Every backlog of the process, for the one fork hook and the one exit hook below.
_every: weakref.WeakSet[Backlog[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for backlog in list(_every):
        backlog._reset()


def _at_exit() -> None:
    backlogs = list(_every)
    for backlog in backlogs:  # every thread starts its last tries now, side by side
        backlog._exiting.set()
    for backlog in backlogs:
        backlog.flush_at_exit()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
