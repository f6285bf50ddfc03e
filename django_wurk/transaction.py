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
every attempt fails. ``WURK["ENQUEUE"] = "outbox"`` goes further: the payload is written
to a table in the same transaction, so even a process killed right after the commit loses
nothing (see ``django_wurk.outbox``).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from redis.exceptions import RedisError

from django_wurk import db
from django_wurk.core.client import NO_DELIVERY, Delivery, Pusher
from django_wurk.core.engine import Wurk
from django_wurk.core.wire import Payload
from django_wurk.signals import push_failed

logger = logging.getLogger("django_wurk.transaction")


def active_alias(preferred: str = DEFAULT_DB_ALIAS) -> str | None:
    """The alias whose atomic block is open (``preferred`` first), or None outside transactions."""
    if not getattr(db._thread, "has_connections", False):
        return None  # this thread never opened a connection, so no transaction is open
    open_aliases = [c.alias for c in connections.all(initialized_only=True) if c.in_atomic_block]
    if not open_aliases:
        return None
    return preferred if preferred in open_aliases else open_aliases[0]


Failed = tuple[list[Payload], float | None, BaseException]


class PushRetrier:
    """Retries pushes that failed after their commit, off the request thread, with back-off."""

    def __init__(self, wurk: Wurk, inner: Pusher) -> None:
        self.wurk = wurk
        self.inner = inner
        self._queue: queue.SimpleQueue[tuple[list[Payload], float | None, BaseException]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, payloads: list[Payload], at: float | None, error: BaseException) -> None:
        self._ensure_thread()
        self._queue.put((payloads, at, error))

    def _ensure_thread(self) -> None:
        import os

        with self._lock:
            # A forked child (a multi-process web server) needs its own thread.
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="wurk-push-retrier", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            payloads, at, error = self._queue.get()
            self._retry(payloads, at, error)

    def _retry(self, payloads: list[Payload], at: float | None, error: BaseException) -> None:
        """``error`` is what made the first push fail; each failed retry replaces it."""
        attempts = self.wurk.config.push_retries
        for attempt in range(1, attempts + 1):
            time.sleep(min(0.5 * 2 ** (attempt - 1), 30.0))
            try:
                self.inner.push(payloads, at)
                logger.warning("pushed %d job(s) on retry %d after the commit", len(payloads), attempt)
                return
            except (RedisError, OSError) as exc:
                error = exc
        jids = ", ".join(str(p.get("jid")) for p in payloads)
        logger.error(
            "gave up pushing %d committed job(s) after %d attempts (%s); jids: %s; payloads: %r",
            len(payloads),
            attempts,
            error,
            jids,
            payloads,
        )
        push_failed.send(sender=Wurk, payloads=payloads, at=at, error=error)


class TransactionAwarePusher:
    """Wraps the Redis pusher so that pushes made in a transaction wait for its commit."""

    def __init__(self, wurk: Wurk, inner: Pusher) -> None:
        self.wurk = wurk
        self.inner = inner
        self.retrier = PushRetrier(wurk, inner)

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        config = self.wurk.config
        if config.enqueue == "immediate" or delivery.get("on_commit") is False:
            self.inner.push(payloads, at)
            return
        using = delivery.get("using")
        alias = (using if connections[using].in_atomic_block else None) if using else None
        if alias is None and not using:
            alias = active_alias(config.database)
        if config.enqueue == "outbox":
            from django_wurk import outbox

            outbox.write(self.wurk, list(payloads), at, using or alias or config.database, self.inner)
            return
        if alias is None:
            self.inner.push(payloads, at)
            return
        transaction.on_commit(functools.partial(self._after_commit, list(payloads), at), using=alias)

    def defer_until_commit(self, action: Callable[[], None]) -> bool:
        """Run ``action`` (a write that is not a plain push: a batch) when the open transaction
        commits, by the same rule as pushes; False when it should run now instead.

        Outbox mode refuses: a row in the outbox carries jobs, not a batch, so a batch
        written there could not keep the outbox's promise of surviving a crash after commit.
        """
        config = self.wurk.config
        if config.enqueue == "immediate":
            return False
        alias = active_alias(config.database)
        if alias is None:
            return False
        if config.enqueue == "outbox":
            raise ImproperlyConfigured(
                "a batch cannot be written inside a transaction with WURK['ENQUEUE'] = 'outbox'; "
                "open the batch's jobs() block after the commit (transaction.on_commit)"
            )
        transaction.on_commit(action, using=alias)
        return True

    def _after_commit(self, payloads: list[Payload], at: float | None) -> None:
        try:
            self.inner.push(payloads, at)
        except (RedisError, OSError) as exc:
            logger.warning(
                "could not push %d job(s) after the commit (%s); retrying in the background",
                len(payloads),
                exc,
            )
            self.retrier.submit(payloads, at, exc)


def install(wurk: Wurk) -> None:
    """Make ``wurk``'s pushes transaction-aware (idempotent)."""
    if not isinstance(wurk.pusher, TransactionAwarePusher):
        wurk.pusher = TransactionAwarePusher(wurk, wurk.pusher)


def unwrap(pusher: Any) -> Any:
    """The pusher that writes to Redis, under any wrappers (transactions, outage buffer)."""
    while hasattr(pusher, "inner"):
        pusher = pusher.inner
    return pusher
