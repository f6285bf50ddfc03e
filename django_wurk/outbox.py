"""The transactional outbox: an enqueue that commits or rolls back with your data.

With ``WURK["ENQUEUE"] = "outbox"`` a push writes an ``OutboxEntry`` row in the caller's
transaction. After the commit the rows are pushed at once and deleted; if the process died
at that moment or Redis was down, the rows stay, and the relay that every worker runs
pushes them later, oldest first.

Each row is pushed exactly once: the push is a Lua script that first sets a marker key for
that row (``SET NX``), so a relay that crashed between pushing and deleting, or two relays
that picked the same row, push it only once and just delete the row (with a WARNING, so a
row that is not pushed never goes unseen). The marker is keyed by the row's random token,
not its id: ids are handed out again after a flush or a restore, and a marker left by an
earlier row with the same id would swallow the new row's job. One relay works at a time
across the cluster (a Redis lease), which keeps the order of rows.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connections
from redis.exceptions import RedisError

from django_wurk.commit import at_commit
from django_wurk.conf import app_settings
from django_wurk.core import keys, wire
from django_wurk.core.client import written_together
from django_wurk.core.engine import Wurk
from django_wurk.core.lease import Lease
from django_wurk.core.wire import Payload
from django_wurk.models import OutboxEntry

logger = logging.getLogger("django_wurk.outbox")

BATCH = 500


def scope(alias: str) -> str:
    """Names one database in marker keys, so two projects sharing a Redis never collide."""
    name = settings.DATABASES[alias].get("NAME", "")
    return f"{alias}:{name}"


def write(wurk: Wurk, payloads: list[Payload], at: float | None, alias: str) -> list[str] | None:
    """Write a row per payload in ``alias``; push them after the commit (at once outside one).

    The rows carry the jobs from here on, not the pusher: what cannot be pushed stays for the relay.
    Pushed at once, the jids a push gate refused (a duplicate unique job) are returned.
    """
    rows = OutboxEntry.objects.using(alias).bulk_create(
        [OutboxEntry(payload=wire.dumps(p), at=at) for p in payloads]
    )
    ids = [row.pk for row in rows]
    if None in ids:
        # A backend that does not return ids from bulk_create: leave the rows to the relay.
        return None
    connection = connections[alias]
    if connection.in_atomic_block:
        at_commit(lambda: deliver(wurk, alias, ids), alias)
        return None
    refused: list[str] = []
    deliver(wurk, alias, ids, refused)
    return refused


def deliver(wurk: Wurk, alias: str, ids: list[int], refused: list[str] | None = None) -> int:
    """Push these rows and delete them; rows that cannot be pushed now stay for the relay."""
    rows = list(OutboxEntry.objects.using(alias).filter(pk__in=ids).order_by("pk"))
    return push_rows(wurk, alias, rows, refused)


def push_rows(wurk: Wurk, alias: str, rows: list[OutboxEntry], refused: list[str] | None = None) -> int:
    """Push each row at most once and delete it; returns how many this call pushed.

    The jids of rows a push gate refused are added to ``refused`` when it is given.

    Callers may race on the same rows (a relay whose lease ran out, a commit's own
    delivery): the row's marker, not the caller, keeps each job to one push. A row whose
    payload cannot be read is kept for inspection; when Redis fails, the rest stay for the relay.
    """
    pushed = 0
    done: list[int] = []
    prefix = scope(alias)
    # Rows pushed together are one write, as a transaction's are at its commit: a unique
    # job's duplicate among them is dropped even when the first has run since it was pushed.
    with written_together():
        try:
            for row in rows:
                try:
                    payload = wire.loads(row.payload)
                except wire.PayloadError:
                    logger.error(
                        "outbox row %s holds an unreadable payload; it is kept for inspection", row.pk
                    )
                    continue
                marker = keys.outbox_marker(prefix, row.token)
                outcome = wurk.writer.write_once(marker, payload, row.at)
                if outcome:
                    pushed += 1
                elif outcome is None:
                    # A gate (unique jobs) refused it now, at the push: the row is done.
                    if refused is not None:
                        refused.append(str(payload.get("jid")))
                    logger.info(
                        "outbox row %s (id %s, jid %s) was not pushed: refused at the push (a duplicate"
                        " unique job)",
                        row.token,
                        row.pk,
                        payload.get("jid"),
                    )
                else:
                    logger.warning(
                        "outbox row %s (id %s, jid %s) was pushed before (marker %s); deleting it without"
                        " a second push",
                        row.token,
                        row.pk,
                        payload.get("jid"),
                        marker,
                    )
                done.append(row.pk)
        except RedisError as exc:
            logger.warning(
                "outbox: Redis unavailable (%s); %d row(s) left for the relay", exc, len(rows) - len(done)
            )
    if done:
        try:
            OutboxEntry.objects.using(alias).filter(pk__in=done).delete()
        except DatabaseError as exc:
            # Harmless: the markers stop a second push; the next pass deletes these rows.
            logger.warning("outbox: could not delete %d pushed row(s) yet (%s)", len(done), exc)
    return pushed


def relay_once(wurk: Wurk, alias: str, lease_seconds: float = 60.0) -> int:
    """Push every row left in the outbox, if no other relay holds the lease; returns pushes."""
    # A fresh token per pass: a pass never mistakes an earlier pass's lease for its own.
    lease = Lease(wurk.scripts, f"{keys.OUTBOX_RELAY_LOCK}:{scope(alias)}", wire.new_jid(), lease_seconds)
    if not lease.acquire():
        return 0
    pushed = 0
    try:
        while True:
            rows = list(OutboxEntry.objects.using(alias).order_by("pk")[:BATCH])
            if not rows:
                return pushed
            pushed += push_rows(wurk, alias, rows)
            if len(rows) < BATCH:
                return pushed
    finally:
        # Only our own lease (compare-and-delete), never one that expired and was taken since.
        lease.release()


class Relay:
    """The thread a worker runs in outbox mode: relay leftovers of every database.

    A push with ``set(using=...)`` writes its row in that database, so each alias is
    relayed. An alias whose database has no outbox table (never migrated there) is
    skipped from then on, with one log line.
    """

    def __init__(self, wurk: Wurk, aliases: list[str]) -> None:
        self.wurk = wurk
        self.aliases = list(aliases)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="wurk-outbox-relay", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def run(self) -> None:
        from django.db import close_old_connections

        while not self.stopping.wait(app_settings().outbox_relay_interval):
            try:
                self.relay_all()
            except RedisError as exc:
                # An outage: the rows wait; the workers' own loops already report it.
                logger.debug("outbox relay: Redis unavailable (%s)", exc)
            except Exception as exc:
                logger.exception("outbox relay failed")
                self.wurk.report_error(exc, {"context": "outbox relay"})
            finally:
                close_old_connections()

    def relay_all(self) -> int:
        total = 0
        for alias in list(self.aliases):
            try:
                relayed = relay_once(self.wurk, alias)
            except DatabaseError as exc:
                if alias in self.aliases and "django_wurk_outbox" in str(exc):
                    logger.info("outbox relay: database %r has no outbox table; not relaying it", alias)
                    self.aliases.remove(alias)
                    continue
                raise
            if relayed:
                logger.info("outbox relay pushed %d job(s) left behind in database %r", relayed, alias)
            total += relayed
        return total
