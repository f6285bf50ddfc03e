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

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from redis.exceptions import RedisError

from django_wurk import db
from django_wurk.commit import at_commit
from django_wurk.conf import app_settings
from django_wurk.core.backlog import Backlog, Fate
from django_wurk.core.client import Delivery, Refused, Route, WriteGroup, write_group, written_together
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


#: How long, at interpreter exit, the retries may go on trying to push what is still waiting
#: before the rest is reported lost. A bound, so a Redis that accepts connections and never
#: answers cannot hold a deploy's shutdown hostage. Read at the exit.
EXIT_FLUSH_SECONDS = 10.0


@dataclass
class Pending:
    """Jobs committed but not yet in Redis."""

    payloads: list[Payload]
    at: float | None
    #: How the push was asked to be delivered: its ``shard`` must survive the retries.
    delivery: Delivery = field(default_factory=dict)
    #: The transaction's writes it belongs to: a retry is still one of them.
    group: WriteGroup | None = None


class Transactions:
    """The Django app's ``Deferral``: pushes made in a transaction wait for its commit.

    ``route`` is the transaction's part of the client's one routing decision: now (no
    transaction, ``ENQUEUE = "immediate"``, ``on_commit=False``), at the commit, or into the
    outbox. Whatever waits is written by the engine's writer in the end, so the push gates
    and the outage buffer apply to it as to any push.

    After the commit, a push that cannot reach Redis is retried with back-off in the
    background (``retries``, a ``core.backlog.Backlog``: ``PUSH_RETRIES`` attempts, in
    order, none in a forked child). At interpreter exit the back-off is cut short: what still
    waits gets one more attempt, for at most ``EXIT_FLUSH_SECONDS``, and whatever still is
    not in Redis is logged at ERROR (jid, class, queue, payload) and sent with
    ``push_failed``, instead of dying silently with the thread. Only the outbox survives an
    exit during an outage; this makes the loss seen.
    """

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk
        self.retries: Backlog[Pending] = Backlog(
            "push-retrier",
            self._push,
            self._lost,
            attempts=lambda: app_settings().push_retries,
            exit_within=lambda: EXIT_FLUSH_SECONDS,
            on_written=self._pushed,
        )

    def route(self, delivery: Delivery) -> Route | None:
        """``None``: push now. Else the route that keeps the push: at the commit, or the outbox."""
        app = app_settings()
        wanted = delivery.get("on_commit") if delivery else None
        # An explicit on_commit=True (Celery's delay_on_commit) defers even under ENQUEUE="immediate".
        if (app.enqueue == "immediate" and wanted is not True) or wanted is False:
            return None
        using = delivery.get("using")
        alias = (using if connections[using].in_atomic_block else None) if using else None
        if alias is None and not using:
            alias = active_alias(app.database)
        if app.enqueue == "outbox":
            if self.wurk.shard != DEFAULT_SHARD:
                # An outbox row names no shard, and the relay pushes to its own.
                raise ImproperlyConfigured(
                    f"WURK['ENQUEUE'] = 'outbox' relays to the 'default' shard only; this push goes to "
                    f"shard {self.wurk.shard!r} (push with on_commit=False, or use ENQUEUE='on_commit')"
                )
            return functools.partial(self._to_outbox, using or alias or app.database)
        if alias is None:
            return None
        return functools.partial(self._at_commit, alias)

    def _to_outbox(
        self, alias: str, payloads: Sequence[Payload], at: float | None, delivery: Delivery
    ) -> Refused:
        """A row per job in the transaction; the rows carry the jobs to the writer after the
        commit (or at once outside one, telling which jobs a gate refused)."""
        from django_wurk import outbox

        return outbox.write(self.wurk, list(payloads), at, alias)

    def _at_commit(
        self, alias: str, payloads: Sequence[Payload], at: float | None, delivery: Delivery
    ) -> Refused:
        """Push at the commit of ``alias``'s transaction; nothing if it rolls back. A refusal
        comes too late to change what was returned, so nothing is."""
        at_commit(functools.partial(self._after_commit, list(payloads), at, delivery), alias)
        return None

    def defer(self, action: Callable[[], None]) -> bool:
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
            self.wurk.writer.push(payloads, at, delivery)
        except (RedisError, OSError) as exc:
            logger.warning(
                "could not push %d job(s) after the commit (%s); retrying in the background",
                len(payloads),
                exc,
            )
            self.retries.submit(Pending(payloads, at, delivery, write_group()), exc)

    def _push(self, item: Pending) -> None:
        with written_together(item.group):
            self.wurk.writer.push(item.payloads, item.at, item.delivery)

    def _pushed(self, item: Pending, attempt: int) -> None:
        logger.warning("pushed %d job(s) on retry %d after the commit", len(item.payloads), attempt)

    def _lost(self, item: Pending, error: BaseException, fate: Fate) -> None:
        if fate in ("exhausted", "failed"):
            logger.error(
                "gave up pushing %d committed job(s) %s (%s); jids: %s; payloads: %r",
                len(item.payloads),
                f"after {app_settings().push_retries} attempts"
                if fate == "exhausted"
                else "at once: the error is not an outage, so a retry would fail the same way",
                error,
                ", ".join(str(p.get("jid")) for p in item.payloads),
                item.payloads,
            )
        else:
            jobs = "; ".join(
                f"jid {p.get('jid')} class {p.get('class')} queue {p.get('queue')}" for p in item.payloads
            )
            # A push still under way may yet reach Redis: whoever re-pushes by hand should
            # look for its jid first.
            fate_text = (
                "may not have reached Redis (a push was still under way when the wait ran out)"
                if fate == "under_way"
                else "never reached Redis and are lost"
            )
            logger.error(
                "%d committed job(s) %s: the process is exiting (%s); %s%s; payloads: %r",
                len(item.payloads),
                fate_text,
                error,
                jobs,
                "" if item.at is None else f" (scheduled at {item.at!r})",
                item.payloads,
            )
        try:
            push_failed.send(sender=Wurk, payloads=item.payloads, at=item.at, error=error)
        except Exception:
            # A failing receiver must neither stop the retries nor hide the next push's report.
            logger.exception("a push_failed receiver failed")


def install(wurk: Wurk) -> None:
    """Make ``wurk``'s pushes follow transactions (idempotent).

    A batch written after its commit is retried like a plain push: ``PUSH_RETRIES`` times
    (at least once).
    """
    if not isinstance(wurk.deferral, Transactions):
        wurk.deferral = Transactions(wurk)
    batch_retrier.attempts = lambda: max(app_settings().push_retries, 1)
