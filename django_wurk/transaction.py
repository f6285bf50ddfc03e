"""Enqueueing that follows the database transaction it happens in.

A job enqueued inside ``transaction.atomic()`` is pushed to Redis only when that
transaction commits, and never if it rolls back; a savepoint rolled back drops only the
jobs enqueued inside it (Django's ``on_commit`` already tracks savepoints). The jid is
returned at once, because the client assigns it before delivery is deferred.

Which transaction: ``job.set(using="alias")`` names it; otherwise the alias whose atomic
block is open, preferring ``WURK["DATABASE"]`` when several are. Outside any transaction
the push happens at once, and ``set(on_commit=False)`` always pushes at once.

After the commit, a push that cannot reach Redis is not dropped: it is retried with
back-off in a background thread, logged, and reported with the ``push_failed`` signal if
every attempt fails, or if the process exits first (the retries live in its memory).
``WURK["ENQUEUE"] = "outbox"`` goes further: the payload is written to a table in the same
transaction, so even a process killed right after the commit, or one that exits during an
outage, loses nothing (see ``django_wurk.outbox``).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from redis.exceptions import RedisError

from django_wurk import db
from django_wurk.commit import at_commit
from django_wurk.conf import app_settings
from django_wurk.core.client import (
    NO_DELIVERY,
    Delivery,
    Pusher,
    Refused,
    WriteGroup,
    write_group,
    written_together,
)
from django_wurk.core.config import DEFAULT_SHARD
from django_wurk.core.engine import Wurk
from django_wurk.core.features.batches.batch import retrier as batch_retrier
from django_wurk.core.wire import Payload
from django_wurk.signals import push_failed

logger = logging.getLogger("django_wurk.transaction")


def active_alias(preferred: str = DEFAULT_DB_ALIAS) -> str | None:
    """The alias whose atomic block is open (``preferred`` first), or None outside transactions."""
    if not db.thread_has_connections():
        return None  # this thread never opened a connection, so no transaction is open
    open_aliases = [c.alias for c in connections.all(initialized_only=True) if c.in_atomic_block]
    if not open_aliases:
        return None
    return preferred if preferred in open_aliases else open_aliases[0]


#: How long, at interpreter exit, the retrier may go on trying to push what is still waiting
#: before the rest is reported lost. A bound, so a Redis that accepts connections and never
#: answers cannot hold a deploy's shutdown hostage.
EXIT_FLUSH_SECONDS = 10.0


@dataclass
class Pending:
    """Jobs committed but not yet in Redis; ``error`` is why the latest attempt failed."""

    payloads: list[Payload]
    at: float | None
    error: BaseException
    #: How the push was asked to be delivered: its ``shard`` must survive the retries.
    delivery: Delivery = field(default_factory=dict)
    #: The transaction's writes it belongs to: a retry is still one of them.
    group: WriteGroup | None = None


class PushRetrier:
    """Retries pushes that failed after their commit, off the request thread, with back-off.

    The retries live in this process's memory, so at interpreter exit (``atexit``) the
    back-off is cut short: every push still waiting gets one more attempt, for at most
    ``EXIT_FLUSH_SECONDS``, and whatever still is not in Redis is logged at ERROR (jid,
    class, queue, payload) and sent with ``push_failed``, instead of dying silently with
    the thread. Only the outbox survives an exit during an outage; this makes the loss seen.
    """

    def __init__(self, wurk: Wurk, inner: Pusher) -> None:
        self.wurk = wurk
        self.inner = inner
        self._pending: deque[Pending] = deque()
        #: The batch the thread is pushing now (out of ``_pending``), if any.
        self._inflight: Pending | None = None
        #: Batches whose last attempt, made because the process is exiting, failed.
        self._unpushed: list[Pending] = []
        self._changed = threading.Condition()
        self._exiting = threading.Event()
        #: Set once the exit handler has taken over what is left; nothing is retried after.
        self._closed = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._hooked = False

    def submit(
        self,
        payloads: list[Payload],
        at: float | None,
        error: BaseException,
        delivery: Delivery = NO_DELIVERY,
        group: WriteGroup | None = None,
    ) -> None:
        item = Pending(payloads, at, error, delivery, group)
        with self._changed:
            if not self._closed:
                self._ensure_thread()
                self._pending.append(item)
                self._changed.notify_all()
                return
        self._report_lost([item])  # committed during the exit itself: nobody is left to retry

    def _ensure_thread(self) -> None:
        """Called with the lock held."""
        if not self._hooked:
            self._hooked = True
            atexit.register(self.flush_at_exit)
            # A forked child (a multi-process web server) starts with nothing to retry:
            # its parent keeps retrying its own pushes, which must not be pushed twice.
            os.register_at_fork(after_in_child=self._forked)
        if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name="wurk-push-retrier", daemon=True)
            self._thread.start()

    def _forked(self) -> None:
        self._pending = deque()
        self._inflight = None
        self._unpushed = []
        self._changed = threading.Condition()  # a lock held by a thread at the fork stays held
        self._exiting = threading.Event()
        self._thread = None

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending:
                    if self._closed:
                        return
                    self._changed.wait()
                if self._closed:
                    return
                item = self._inflight = self._pending.popleft()
            pushed = self._retry(item)
            with self._changed:
                self._inflight = None
                if self._closed:
                    if pushed:
                        logger.warning(
                            "pushed %d job(s) after they were reported lost at exit", len(item.payloads)
                        )
                    return
                # Decided under the lock the exit handler sets `_exiting` with, so a batch is
                # either given up here or left to that handler, never neither.
                give_up = not pushed and not self._exiting.is_set()
                if not pushed and not give_up:
                    self._unpushed.append(item)
                self._changed.notify_all()
            if give_up:
                self._give_up(item)

    def _retry(self, item: Pending) -> bool:
        """Push ``item`` with back-off; at exit, with one last attempt and no more waiting."""
        attempts = app_settings().push_retries
        for attempt in range(1, attempts + 1):
            if self._exiting.wait(min(0.5 * 2 ** (attempt - 1), 30.0)):
                return self._attempt(item, "at exit")
            if self._attempt(item, f"on retry {attempt}"):
                return True
        return False

    def _attempt(self, item: Pending, when: str) -> bool:
        try:
            with written_together(item.group):
                self.inner.push(item.payloads, item.at, item.delivery)
        except Exception as exc:
            # Anything, not only Redis errors: an exception escaping would kill the thread and
            # strand every batch behind this one, unreported until the next failed commit.
            item.error = exc
            return False
        logger.warning("pushed %d job(s) %s after the commit", len(item.payloads), when)
        return True

    def _give_up(self, item: Pending) -> None:
        jids = _jids(item)
        logger.error(
            "gave up pushing %d committed job(s) after %d attempts (%s); jids: %s; payloads: %r",
            len(item.payloads),
            app_settings().push_retries,
            item.error,
            jids,
            item.payloads,
        )
        self._signal(item)

    def flush_at_exit(self) -> None:
        """Give what is still waiting one last chance, then report the rest (``atexit``)."""
        deadline = time.monotonic() + EXIT_FLUSH_SECONDS
        with self._changed:
            if self._pid != os.getpid() or self._closed:
                return
            self._exiting.set()  # wakes the thread out of its back-off
            self._changed.notify_all()
            thread_alive = self._thread is not None and self._thread.is_alive()
            while thread_alive and (self._pending or self._inflight is not None):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            lost = self._unpushed + ([self._inflight] if self._inflight else []) + list(self._pending)
            under_way = self._inflight
            self._unpushed, self._pending = [], deque()
            self._closed = True
            self._changed.notify_all()
        self._report_lost(lost, under_way)

    def _report_lost(self, items: list[Pending], under_way: Pending | None = None) -> None:
        for item in items:
            jobs = "; ".join(
                f"jid {p.get('jid')} class {p.get('class')} queue {p.get('queue')}" for p in item.payloads
            )
            # A push still under way may yet reach Redis: whoever re-pushes by hand should
            # look for its jid first.
            fate = (
                "may not have reached Redis (a push was still under way when the wait ran out)"
                if item is under_way
                else "never reached Redis and are lost"
            )
            logger.error(
                "%d committed job(s) %s: the process is exiting (%s); %s%s; payloads: %r",
                len(item.payloads),
                fate,
                item.error,
                jobs,
                "" if item.at is None else f" (scheduled at {item.at!r})",
                item.payloads,
            )
            self._signal(item)

    def _signal(self, item: Pending) -> None:
        try:
            push_failed.send(sender=Wurk, payloads=item.payloads, at=item.at, error=item.error)
        except Exception:
            # A failing receiver must neither kill the retrier nor hide the next batch.
            logger.exception("a push_failed receiver failed")


def _jids(item: Pending) -> str:
    return ", ".join(str(p.get("jid")) for p in item.payloads)


class TransactionAwarePusher:
    """Wraps the Redis pusher so that pushes made in a transaction wait for its commit."""

    def __init__(self, wurk: Wurk, inner: Pusher) -> None:
        self.wurk = wurk
        self.inner = inner
        self.retrier = PushRetrier(wurk, inner)

    def push(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY
    ) -> Refused:
        """Push now (telling the caller which jobs a gate refused), or later: at the commit,
        or through the outbox, where a refusal comes too late to change what was returned."""
        app = app_settings()
        wanted = delivery.get("on_commit")
        # An explicit on_commit=True (Celery's delay_on_commit) defers even under ENQUEUE="immediate".
        if (app.enqueue == "immediate" and wanted is not True) or wanted is False:
            return self.inner.push(payloads, at, delivery)
        using = delivery.get("using")
        alias = (using if connections[using].in_atomic_block else None) if using else None
        if alias is None and not using:
            alias = active_alias(app.database)
        if app.enqueue == "outbox":
            from django_wurk import outbox

            if self.wurk.shard != DEFAULT_SHARD:
                # An outbox row names no shard, and the relay pushes to its own.
                raise ImproperlyConfigured(
                    f"WURK['ENQUEUE'] = 'outbox' relays to the 'default' shard only; this push goes to "
                    f"shard {self.wurk.shard!r} (push with on_commit=False, or use ENQUEUE='on_commit')"
                )
            return outbox.write(self.wurk, list(payloads), at, using or alias or app.database)
        if alias is None:
            return self.inner.push(payloads, at, delivery)
        at_commit(functools.partial(self._after_commit, list(payloads), at, delivery), alias)
        return None

    def defer_until_commit(self, action: Callable[[], None]) -> bool:
        """Run ``action`` (a write that is not a plain push: a batch) when the open transaction
        commits, by the same rule as pushes; False when it should run now instead.

        Outbox mode refuses: a row in the outbox carries jobs, not a batch, so a batch
        written there could not keep the outbox's promise of surviving a crash after commit.
        """
        app = app_settings()
        if app.enqueue == "immediate":
            return False
        alias = active_alias(app.database)
        if alias is None:
            return False
        if app.enqueue == "outbox":
            raise ImproperlyConfigured(
                "a batch cannot be written inside a transaction with WURK['ENQUEUE'] = 'outbox'; "
                "open the batch's jobs() block after the commit (transaction.on_commit)"
            )
        at_commit(action, alias)
        return True

    def _after_commit(self, payloads: list[Payload], at: float | None, delivery: Delivery) -> None:
        try:
            self.inner.push(payloads, at, delivery)
        except (RedisError, OSError) as exc:
            logger.warning(
                "could not push %d job(s) after the commit (%s); retrying in the background",
                len(payloads),
                exc,
            )
            self.retrier.submit(payloads, at, exc, delivery, write_group())


def install(wurk: Wurk) -> None:
    """Make ``wurk``'s pushes transaction-aware (idempotent).

    A batch written after its commit is retried like a plain push: ``PUSH_RETRIES`` times.
    """
    if not isinstance(wurk.pusher, TransactionAwarePusher):
        wurk.pusher = TransactionAwarePusher(wurk, wurk.pusher)
    batch_retrier.attempts = lambda: app_settings().push_retries


def unwrap(pusher: Any) -> Any:
    """The pusher that writes to Redis, under any wrappers (transactions, outage buffer)."""
    while hasattr(pusher, "inner"):
        pusher = pusher.inner
    return pusher
