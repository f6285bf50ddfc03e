"""``Batch``: a group of jobs with callbacks when they are done.

``Batch()`` writes nothing. ``with batch.jobs():`` collects every job pushed in the block
(``perform_async``, ``perform_in``, ``perform_bulk``, from any job class) in memory, and
when the block ends writes them and the batch in one atomic step (one Lua call): either
the batch exists with all its jobs queued and counted, or nothing was written. A block
that raises writes nothing. Blocks nest: a block opened inside another (a child batch
created in its parent's block, or the same batch again) joins the outer block's write.

Inside a ``transaction.atomic()`` block (Django, ``ENQUEUE = "on_commit"``), the write
waits for the commit like any push, and is dropped on rollback; after the commit it is
retried in the background if Redis is unreachable, and a retry never writes twice (the
write carries a token). ``ENQUEUE = "outbox"`` refuses batches inside a transaction.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from django_wurk.core import priority, wire
from django_wurk.core.backlog import Backlog, Fate
from django_wurk.core.client import NO_DELIVERY, Delivery, EnqueueError, capture, capturing, writes_to_redis
from django_wurk.core.config import QUEUE_NAME, redact_url
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.batches import keys
from django_wurk.core.features.batches.callbacks import target_name
from django_wurk.core.features.batches.script import CALLBACKS_MAX, run
from django_wurk.core.features.batches.settings import BatchSettings
from django_wurk.core.features.batches.status import EVENTS, BatchStatus
from django_wurk.core.wire import Payload, check_json_native

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.batches")

#: The batch of the job running in this context (set by the server middleware), so a job
#: can find its batch and a batch created inside it becomes its child.
running_bid: ContextVar[str | None] = ContextVar("django_wurk_running_bid", default=None)


class BatchError(Exception):
    """A batch could not be written as asked; nothing was written."""


class NoSuchBatch(BatchError, LookupError):
    """The batch (or the parent named) does not exist: never written, or expired."""


class BatchClosed(BatchError):
    """The batch (or the parent named) is complete: jobs or children can no longer join it."""


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


#: ``Batch(parent=AUTO)``: the batch whose ``jobs()`` block is open here, else the batch of
#: the running job, else none.
AUTO: Any = _Auto()


def new_bid() -> str:
    """URL-safe base64 of 10 random bytes (14 characters), like Sidekiq Pro's."""
    return base64.urlsafe_b64encode(os.urandom(10)).rstrip(b"=").decode("ascii")


def _seconds(value: int | float | timedelta | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 10**10:
        raise ValueError(f"Batch {name} must be seconds (or a timedelta) greater than 0, got {value!r}")
    return max(int(value), 1)


class Batch:
    """A new batch (``Batch(description=...)``) or an existing one (``Batch(bid=...)``)."""

    def __init__(
        self,
        *,
        bid: str | None = None,
        description: str | None = None,
        parent: Batch | str | None = AUTO,
        callback_queue: str | None = None,
        expires_in: int | float | timedelta | None = None,
        linger: int | float | timedelta | None = None,
        wurk: Wurk | None = None,
    ) -> None:
        self._wurk = wurk or default_wurk
        if bid is not None:
            if not isinstance(bid, str) or not keys.BID.match(bid):
                raise ValueError(f"{bid!r} is not a batch id")
            given = (description, callback_queue, expires_in, linger)
            if any(v is not None for v in given) or parent is not AUTO:
                raise ValueError("Batch(bid=...) opens an existing batch; its options cannot be changed")
            self.bid = bid
            #: Known to exist in Redis (opened by bid, or written by a jobs() block).
            self._saved = True
            self._parent: Batch | str | None = None
        else:
            self.bid = new_bid()
            self._saved = False
            self._parent = _resolve_parent(parent)
        if description is not None and not isinstance(description, str):
            raise ValueError(f"Batch description must be a string, got {description!r}")
        self.description = description or ""
        # fullmatch: the name is written into the callback jobs' JSON as it is (no "x\n").
        if callback_queue is not None and (
            not isinstance(callback_queue, str) or not QUEUE_NAME.fullmatch(callback_queue)
        ):
            raise ValueError(f"Batch callback_queue {callback_queue!r} must be a queue name")
        self.callback_queue = callback_queue or "default"
        self.expires_in = _seconds(expires_in, "expires_in")
        self.linger = _seconds(linger, "linger")
        #: Callback entries registered before the batch was written; the first write takes them.
        self._callbacks: list[str] = []

    def __repr__(self) -> str:
        return f"<Batch {self.bid}{' ' + repr(self.description) if self.description else ''}>"

    @property
    def parent_bid(self) -> str | None:
        if self._parent is None and self._saved:
            return self.status.parent_bid
        return self._parent.bid if isinstance(self._parent, Batch) else self._parent

    @property
    def status(self) -> BatchStatus:
        return BatchStatus(self.bid, self._wurk)

    @classmethod
    def current(cls) -> Batch | None:
        """The batch of the job running in this thread (``None`` outside batch jobs).

        The accessor for function jobs; a ``Job`` subclass also has ``self.batch``.
        """
        bid = running_bid.get()
        return cls(bid=bid) if bid else None

    # Callbacks ------------------------------------------------------------------------

    def on(self, event: str, target: Any, options: Mapping[str, Any] | None = None) -> Batch:
        """Call ``target`` when ``event`` (``complete``, ``success`` or ``death``) fires.

        ``target`` is a ``BatchCallback`` subclass or its dotted path (``"pkg.mod.Cls"``, or
        ``"pkg.mod.Cls#method"`` to call another method than ``on_<event>``). Registering the
        same (event, target, options) twice keeps one; a batch keeps at most 1,000.
        """
        if event not in EVENTS:
            raise ValueError(f"batch event must be one of {', '.join(EVENTS)}, got {event!r}")
        name = target_name(target, event)
        opts = dict(options) if options is not None else {}
        check_json_native(opts, f"options of the {event!r} callback")
        entry = json.dumps(
            [event, name, opts], ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
        )
        if self._saved and writes_to_redis(self._wurk):
            reply = int(run(self._wurk, "callback", self.bid, entry, event))
            if reply == -1:
                raise NoSuchBatch(f"batch {self.bid} does not exist (never written, or expired)")
            if reply == -2:
                raise BatchError(f"batch {self.bid} has {CALLBACKS_MAX} callbacks already")
            if reply == 2:
                logger.warning(
                    "batch %s: %s callback %s was added after %r fired; it will not run",
                    self.bid,
                    event,
                    name,
                    event,
                )
        elif entry not in self._callbacks:
            if len(self._callbacks) >= CALLBACKS_MAX:
                raise BatchError(f"batch {self.bid} has {CALLBACKS_MAX} callbacks already")
            self._callbacks.append(entry)
        return self

    # Jobs -----------------------------------------------------------------------------

    @contextmanager
    def jobs(self) -> Iterator[Batch]:
        """Collect the jobs pushed in this block; write them and the batch when it ends."""
        outer = capturing()
        joined = isinstance(outer, _Block)
        flush = outer.flush if isinstance(outer, _Block) else _Flush(self._wurk)
        mark = len(flush.entries)
        sizes = [len(e.jobs) for e in flush.entries]
        entry = flush.entry_for(self)
        try:
            with capture(_Block(self, flush, entry)):
                yield self
        except BaseException:
            # Nothing of this block (nor of blocks nested in it) is written.
            del flush.entries[mark:]
            for kept, size in zip(flush.entries, sizes, strict=False):
                del kept.jobs[size:]
            raise
        if not joined:
            flush.finish()

    # Cancelling -----------------------------------------------------------------------

    def invalidate_all(self) -> bool:
        """Mark the batch cancelled: its jobs (and its children's) see ``valid()`` False.

        Jobs still run and count as usual (so callbacks fire); a job checks
        ``self.valid_within_batch()`` to skip its work. False if the batch does not exist.
        """
        if not writes_to_redis(self._wurk):
            return False
        return bool(run(self._wurk, "invalidate", self.bid))

    def valid(self) -> bool:
        """False once this batch or an ancestor was invalidated."""
        if not writes_to_redis(self._wurk):
            return True
        return bool(run(self._wurk, "valid", self.bid))


def _resolve_parent(parent: Any) -> Batch | str | None:
    if parent is AUTO:
        block = capturing()
        if isinstance(block, _Block):
            return block.batch
        return running_bid.get()
    if parent is None or isinstance(parent, Batch):
        return parent
    if isinstance(parent, str) and keys.BID.match(parent):
        return parent
    raise ValueError(f"Batch parent must be a Batch, a batch id or None, got {parent!r}")


class _Entry:
    """One batch's part of a write: its jobs, in push order, each with its time (None = now)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.jobs: list[tuple[Payload, float | None]] = []


class _Block:
    """What an open ``jobs()`` block gives the client instead of the pusher."""

    def __init__(self, batch: Batch, flush: _Flush, entry: _Entry) -> None:
        self.batch = batch
        self.bid = batch.bid
        self.flush = flush
        self.entry = entry

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        # Each push's own delivery options (on_commit, using) give way to the block's.
        bid = self.bid
        for payload in payloads:
            payload["bid"] = bid
            self.entry.jobs.append((payload, at))


class _Flush:
    """Everything one outermost ``jobs()`` block collected, written in one script call."""

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk
        self.entries: list[_Entry] = []
        self.token = ""
        #: The shard current when the block opened: the batch lives there, even when it is
        #: written after the commit or by the retrier, outside the caller's ``via()`` block.
        self.shard = wurk.shard

    def entry_for(self, batch: Batch) -> _Entry:
        for entry in self.entries:
            if entry.batch is batch:
                return entry
        entry = _Entry(batch)
        self.entries.append(entry)
        return entry

    @property
    def bids(self) -> list[str]:
        return [e.batch.bid for e in self.entries]

    def finish(self) -> None:
        if not self.entries:
            return
        if not writes_to_redis(self.wurk):
            self._hand_to_pusher()
            return
        deferral = self.wurk.deferral
        if deferral is not None and deferral.defer(self._after_commit):
            return
        try:
            self.write()
        except (RedisError, OSError) as exc:
            # Never buffered like a plain push: the batch and its jobs go together or not at all.
            jobs = sum(len(e.jobs) for e in self.entries)
            raise EnqueueError(
                f"could not write batch {', '.join(self.bids)} ({jobs} job{'' if jobs == 1 else 's'}) "
                f"to Redis at {redact_url(self.wurk.config.redis_url)}: {exc}"
            ) from exc

    def _hand_to_pusher(self) -> None:
        """Testing modes: the jobs go to the fake or inline pusher, with their bid; no batch state."""
        for entry in self.entries:
            by_time: dict[float | None, list[Payload]] = {}
            for payload, at in entry.jobs:
                by_time.setdefault(at, []).append(payload)
            for at, payloads in by_time.items():
                self.wurk.pusher.push(payloads, at)

    def _after_commit(self) -> None:
        # A write retried after a lost reply must not apply twice: the token makes it once-only.
        self.token = self.token or os.urandom(8).hex()
        if retrier.busy():  # earlier writes are still waiting for Redis: keep the order
            retrier.submit(self)
            return
        try:
            self.write()
        except (RedisError, OSError) as exc:
            logger.warning(
                "could not write batch %s after the commit (%s); retrying in the background",
                ", ".join(self.bids),
                exc,
            )
            retrier.submit(self, exc)
        except BatchError as exc:
            self.lost(exc)

    def lost(self, exc: BaseException) -> None:
        """Say loudly that a write made after its commit was given up, with every payload."""
        payloads = [payload for entry in self.entries for payload, _ in entry.jobs]
        logger.error(
            "gave up writing batch %s after the commit (%s); its %d job(s) were not pushed: %r",
            ", ".join(self.bids),
            exc,
            len(payloads),
            payloads,
        )
        self.wurk.report_error(
            exc, {"context": "batch write after commit", "bids": self.bids, "jobs": payloads}
        )

    def write(self) -> None:
        """One Lua call: check every batch, then write batches, callbacks and jobs."""
        with self.wurk.via(self.shard):
            self._write()

    def _write(self) -> None:
        config = self.wurk.config
        # The block's jobs are written now, so the writer's push gates (unique jobs) decide
        # now, and stamp them; the script below writes them with the batch.
        for entry in self.entries:
            entry.jobs = self.wurk.writer.ready(entry.jobs)
        argv: list[Any] = [self.token, len(self.entries)]
        taken: list[int] = []
        for entry in self.entries:
            batch = entry.batch
            new = not batch._saved
            fields: list[Any] = []
            callbacks: list[str] = []
            ttl = 0
            if new:
                ttl = batch.expires_in or config.section(BatchSettings).batch_expires_in
                fields = [
                    "description",
                    batch.description,
                    "callback_queue",
                    batch.callback_queue,
                    "expires_in",
                    ttl,
                    "linger",
                    batch.linger or config.section(BatchSettings).batch_linger,
                ]
                callbacks = list(batch._callbacks)
            taken.append(len(callbacks))
            parent = batch.parent_bid if new else None
            texts = wire.dumps_alike([payload for payload, _ in entry.jobs])
            jobs: list[Any] = []
            for (payload, at), text in zip(entry.jobs, texts, strict=True):
                jobs += (
                    payload["jid"],
                    priority.listed_for(str(payload.get("queue") or "default"), payload),
                    "" if at is None else repr(at),
                    text,
                )
            argv += (batch.bid, "1" if new else "0", parent or "", ttl, len(fields) // 2, len(callbacks))
            argv.append(len(entry.jobs))
            argv += fields
            argv += callbacks
            argv += jobs
        reply = run(self.wurk, "flush", *argv)
        outcome = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        if outcome not in ("ok", "done"):
            bid = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
            raise _refusal(outcome, bid)
        for entry, n in zip(self.entries, taken, strict=True):
            entry.batch._saved = True
            del entry.batch._callbacks[:n]


def _refusal(outcome: str, bid: str) -> BatchError:
    if outcome == "missing":
        return NoSuchBatch(f"batch {bid} does not exist (never written, or expired); no jobs were pushed")
    if outcome == "closed":
        return BatchClosed(f"batch {bid} is complete; jobs can no longer join it (none were pushed)")
    if outcome == "no_parent":
        return NoSuchBatch(
            f"parent batch {bid} does not exist (write the parent first, e.g. create the child "
            "inside the parent's jobs() block); no jobs were pushed"
        )
    if outcome == "parent_closed":
        return BatchClosed(
            f"parent batch {bid} is complete; a child can no longer join it (no jobs were pushed)"
        )
    return BatchError(f"batch {bid}: {outcome}; no jobs were pushed")


def _rewritten(flush: _Flush, attempt: int) -> None:
    logger.warning("wrote batch %s on retry %d after the commit", ", ".join(flush.bids), attempt)


def _given_up(flush: _Flush, error: BaseException, fate: Fate) -> None:
    if fate in ("exiting", "under_way") and isinstance(error, (RedisError, OSError)):
        error = TimeoutError(f"the process exited while Redis was unreachable ({error})")
    flush.lost(error)


#: Batch writes that failed after their commit, retried in order by one background thread
#: (``core/backlog.py``); a refusal (``BatchError``) is not an outage and is reported at once.
#: At exit what still waits gets one more try, for 5 seconds in all, and the rest is
#: logged at ERROR with its jobs. The Django app points ``attempts`` at ``PUSH_RETRIES``
#: (``transaction.install``), as for plain on-commit pushes.
retrier: Backlog[_Flush] = Backlog(
    "batch-retrier",
    lambda flush: flush.write(),
    _given_up,
    attempts=lambda: 8,
    exit_within=lambda: 5.0,
    on_written=_rewritten,
)
