"""A backlog: writes that could not reach Redis, kept and retried in order until they do.

Three parts of the client keep writes for later: pushes made after a commit while Redis
was down, pushes made during an outage with ``CLIENT_BUFFER``, and batch writes after a
commit. Each needs the same things, which this module owns once:

* **order**: one thread retries the oldest write first; a new write joins the end while
  older ones wait (``busy()``), so a later push never overtakes an earlier one;
* **back-off**: 0.5 s, doubling to at most ``MAX_DELAY``, for ``attempts()`` tries (``None``:
  until it works); an error that is not an outage (not ``RedisError``/``OSError``) would
  fail the same way every time, so the write is given up at once, never retried forever;
* **a bound**: past ``limit()`` waiting items a new one is refused (``BacklogFull``),
  nothing already kept is dropped;
* **fork**: a forked child starts with an empty backlog (its parent keeps retrying its
  own writes; the child must not write them twice) and no thread;
* **exit**: at interpreter exit the back-off is cut short, what waits gets one more try
  for at most ``exit_within`` seconds, and the rest goes to ``on_lost``, never silently
  away with the thread. ``on_lost`` is also told of a write given up on its last attempt.

The writes themselves, what "lost" means (a log line with the payloads, a signal) and how
many attempts are allowed belong to the caller.
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
from typing import Any, Generic, TypeVar

from redis.exceptions import RedisError

logger = logging.getLogger("django_wurk.backlog")

T = TypeVar("T")

#: The longest wait between two attempts.
MAX_DELAY = 30.0
FIRST_DELAY = 0.5


class BacklogFull(Exception):
    """The backlog holds ``limit()`` items already: this one was refused, the others are kept."""


def delay(attempt: int) -> float:
    """The wait before attempt ``attempt`` (1 is the first retry)."""
    return float(min(FIRST_DELAY * 2.0 ** (attempt - 1), MAX_DELAY))


class Backlog(Generic[T]):
    """Items kept for ``write``, retried in order by one thread (see the module)."""

    def __init__(
        self,
        name: str,
        write: Callable[[T], object],
        on_lost: Callable[[T, BaseException, bool], None],
        *,
        attempts: Callable[[], int | None] = lambda: None,
        limit: Callable[[], int | None] = lambda: None,
        exit_within: float = 10.0,
        on_written: Callable[[T, int], None] | None = None,
    ) -> None:
        """``on_lost(item, error, under_way)``: ``item`` will not be written; ``under_way`` when
        the process exited while a write of it was in flight (it may have reached Redis).
        ``on_written(item, attempt)`` after a write that succeeded on a retry."""
        self.name = name
        self._write = write
        self._on_lost = on_lost
        self._on_written = on_written
        self.attempts = attempts
        self.limit = limit
        self.exit_within = exit_within
        self._items: deque[T] = deque()
        self._changed = threading.Condition()
        #: The item the thread is writing now (taken off ``_items``), if any.
        self._inflight: T | None = None
        self._thread: threading.Thread | None = None
        self._exiting = threading.Event()
        #: Set once the exit flush took over; nothing is retried after.
        self._closed = False
        _all.add(self)

    def __len__(self) -> int:
        return len(self._items) + (self._inflight is not None)

    def busy(self) -> bool:
        """Whether anything waits: a new write must then join the end, to keep the order."""
        return bool(self._items) or self._inflight is not None

    def submit(self, item: T) -> None:
        """Keep ``item`` for the thread to write; ``BacklogFull`` past ``limit()``."""
        with self._changed:
            if self._closed:
                closed = True
            else:
                closed = False
                bound = self.limit()
                if bound is not None and len(self) + 1 > bound:
                    raise BacklogFull(f"{self.name}: {len(self)} item(s) wait already, the limit is {bound}")
                self._items.append(item)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=f"wurk-{self.name}", daemon=True)
                    self._thread.start()
                self._changed.notify_all()
        if closed:  # submitted during the exit itself: nobody is left to retry it
            self._on_lost(item, RuntimeError("the process is exiting"), False)

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._items or self._closed:
                    self._thread = None
                    return
                item = self._inflight = self._items.popleft()
            written, error = self._retry(item)
            with self._changed:
                self._inflight = None
                exiting = self._closed or self._exiting.is_set()
                if not written and exiting:
                    self._items.appendleft(item)  # the exit flush decides its fate
                self._changed.notify_all()
            if not written and not exiting:
                assert error is not None
                self._lost(item, error, False)

    def _retry(self, item: T) -> tuple[bool, BaseException | None]:
        """Write ``item`` with back-off until it works or the attempts run out."""
        attempt = 0
        allowed = self.attempts()
        error: BaseException | None = None
        while allowed is None or attempt < allowed:
            attempt += 1
            if self._exiting.wait(delay(attempt)):
                return False, error
            try:
                self._write(item)
            except (RedisError, OSError) as exc:
                error = exc
                continue
            except Exception as exc:  # it would fail the same way every time
                return False, exc
            if self._on_written is not None:
                self._on_written(item, attempt)
            return True, None
        return False, error or RuntimeError("no attempt was allowed")

    def _lost(self, item: T, error: BaseException, under_way: bool) -> None:
        try:
            self._on_lost(item, error, under_way)
        except Exception:  # a failing report must not hide the next item's
            logger.exception("%s: reporting a lost write failed", self.name)

    def flush_at_exit(self) -> None:
        """One last try for what waits, for at most ``exit_within`` seconds; the rest is lost."""
        deadline = time.monotonic() + self.exit_within
        with self._changed:
            if self._closed:
                return
            self._exiting.set()  # wakes the thread out of its back-off
            self._changed.notify_all()
            while self._inflight is not None and time.monotonic() < deadline:
                self._changed.wait(max(0.0, deadline - time.monotonic()))
            under_way = self._inflight
            self._closed = True
            waiting = list(self._items)
            self._items.clear()
        last_error: BaseException | None = None
        for item in waiting:
            if time.monotonic() < deadline:
                try:
                    self._write(item)
                    continue
                except Exception as exc:
                    last_error = exc
            self._lost(
                item, last_error or TimeoutError("the process exited before it could be written"), False
            )
        if under_way is not None:
            self._lost(under_way, TimeoutError("the process exited while it was being written"), True)

    def _forked(self) -> None:
        # In the child right after fork, where another thread may have held the lock.
        self._changed = threading.Condition()
        self._items = deque()
        self._inflight = None
        self._thread = None
        self._exiting = threading.Event()
        self._closed = False


#: Every backlog of the process, for the one fork and exit hook below.
_all: weakref.WeakSet[Backlog[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for backlog in list(_all):
        backlog._forked()


def _at_exit() -> None:
    for backlog in list(_all):
        backlog.flush_at_exit()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
