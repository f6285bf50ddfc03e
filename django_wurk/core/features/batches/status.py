"""Reading batches: one batch's status, the index of batches, and the dead batches.

A ``BatchStatus`` is a snapshot read in one MULTI (the hash and every set's size), so its
numbers agree with each other; ``reload()`` takes a fresh one. Anything in Redis may have
been written by someone else, so every field is read defensively: a counter that is not a
number (or is negative, or past 2**53) reads as 0, a time that is not a finite number as
None, a key holding another type than the batch's as absent, a callback entry that the
one decoding policy (``wire.decode_json``) refuses is skipped; never as an exception.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.batches import keys

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

EVENTS = ("complete", "success", "death")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


#: Counters outside 0..2**53 are not counts any writer made (and would overflow a float).
_COUNT_MAX = 2**53


def _int(value: Any) -> int:
    try:
        n = int(_text(value))
    except ValueError:
        return 0
    return n if 0 <= n < _COUNT_MAX else 0


def _key_bid(bid: str) -> bool:
    """Whether ``bid`` can be part of a key name (a lone surrogate cannot be encoded)."""
    try:
        bid.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _time(value: Any) -> float | None:
    try:
        t = float(_text(value))
    except ValueError:
        return None
    return t if t == t and abs(t) != float("inf") else None


@dataclass(frozen=True)
class CallbackInfo:
    """One registered callback, and whether its event has fired for it."""

    event: str
    target: str
    options: Any
    #: The callback job was pushed (its event fired after it was registered).
    fired: bool


class BatchStatus:
    """What a batch is doing: counts, times, failures, children and callbacks.

    ``pending`` counts jobs that have not succeeded yet (a dead job stays pending: the
    batch has not succeeded); ``failures`` counts jobs that failed and have not succeeded
    since (retrying or dead), ``dead_jids`` the dead ones among them.
    """

    def __init__(self, bid: str, wurk: Wurk | None = None) -> None:
        self.bid = bid
        self._wurk = wurk or default_wurk
        self._fields: dict[str, str] = {}
        self.reload()

    def reload(self) -> BatchStatus:
        bid = self.bid
        if not _key_bid(bid):
            replies: list[Any] = [{}, 0, 0, 0, 0, 0, -2]
        else:
            pipe = self._wurk.redis.pipeline(transaction=True)
            pipe.hgetall(keys.batch(bid))
            pipe.scard(keys.jids(bid))
            pipe.scard(keys.failed(bid))
            pipe.scard(keys.died(bid))
            pipe.scard(keys.kids(bid))
            pipe.scard(keys.pending_kids(bid))
            pipe.ttl(keys.batch(bid))
            # A key someone else wrote with another type reads as absent (WRONGTYPE is per command).
            replies = [
                ({} if i == 0 else 0) if isinstance(reply, ResponseError) else reply
                for i, reply in enumerate(pipe.execute(raise_on_error=False))
            ]
        fields, live, failed, died, kids, pending_kids, ttl = replies
        self._fields = {_text(k): _text(v) for k, v in fields.items()}
        self.live = int(live)
        self.failures = int(failed)
        self.dead = int(died)
        self.child_count = int(kids)
        self.pending_children = int(pending_kids)
        #: Seconds until the batch expires (None if it does not exist or never expires).
        self.expires_in: int | None = int(ttl) if int(ttl) >= 0 else None
        return self

    # The hash -------------------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return bool(self._fields)

    @property
    def total(self) -> int:
        return _int(self._fields.get("total"))

    @property
    def pending(self) -> int:
        return _int(self._fields.get("pending"))

    @property
    def succeeded_jobs(self) -> int:
        return max(self.total - self.pending, 0)

    @property
    def description(self) -> str:
        return self._fields.get("description", "")

    @property
    def parent_bid(self) -> str | None:
        return self._fields.get("parent_bid") or None

    @property
    def callback_queue(self) -> str:
        return self._fields.get("callback_queue") or "default"

    @property
    def created_at(self) -> float | None:
        return _time(self._fields.get("created_at"))

    @property
    def complete_at(self) -> float | None:
        return _time(self._fields.get("complete_at"))

    @property
    def success_at(self) -> float | None:
        return _time(self._fields.get("success_at"))

    @property
    def death_at(self) -> float | None:
        return _time(self._fields.get("death_at"))

    @property
    def complete(self) -> bool:
        """Every job has run once (succeeded or died) and every child batch is complete."""
        return "complete_at" in self._fields

    @property
    def succeeded(self) -> bool:
        """Every job and every child batch has succeeded (the ``success`` event fired)."""
        return "success_at" in self._fields

    @property
    def died(self) -> bool:
        """A job of this batch or of a descendant died (the ``death`` event fired)."""
        return "death_at" in self._fields

    @property
    def invalidated(self) -> bool:
        return self._fields.get("invalidated") == "1"

    @property
    def linger(self) -> int:
        return _int(self._fields.get("linger"))

    # The sets, read when asked for ------------------------------------------------------

    def _members(self, key: str) -> list[str]:
        if not _key_bid(self.bid):
            return []
        try:
            return sorted(_text(m) for m in self._wurk.redis.smembers(key))
        except ResponseError:  # not a set: written by someone else
            return []

    @property
    def failed_jids(self) -> list[str]:
        return self._members(keys.failed(self.bid))

    @property
    def dead_jids(self) -> list[str]:
        return self._members(keys.died(self.bid))

    @property
    def pending_jids(self) -> list[str]:
        """Jids not yet finished (neither succeeded nor dead)."""
        return self._members(keys.jids(self.bid))

    @property
    def child_bids(self) -> list[str]:
        return self._members(keys.kids(self.bid))

    @property
    def callbacks(self) -> list[CallbackInfo]:
        out = []
        upto = {event: _int(self._fields.get(f"{event}_upto", "-1")) for event in EVENTS}
        fired = {event: f"{event}_at" in self._fields for event in EVENTS}
        try:
            entries = self._wurk.redis.lrange(keys.callbacks(self.bid), 0, -1) if _key_bid(self.bid) else []
        except ResponseError:  # not a list: written by someone else
            entries = []
        for i, raw in enumerate(entries):
            try:
                event, target, options = wire.decode_json(raw, "batch callback")
            except (ValueError, TypeError, RecursionError):
                continue
            event = str(event)
            out.append(CallbackInfo(event, str(target), options, fired.get(event, False) and i < upto[event]))
        return out

    # Helpers ---------------------------------------------------------------------------

    def join(self, timeout: float | None = None, interval: float = 0.5) -> bool:
        """Wait until the batch is complete (polling); False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.reload().complete:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(interval)
        return True

    def data(self) -> dict[str, Any]:
        """The status as JSON-ready data (for a polling endpoint)."""
        return {
            "bid": self.bid,
            "exists": self.exists,
            "description": self.description,
            "parent_bid": self.parent_bid,
            "total": self.total,
            "pending": self.pending,
            "failures": self.failures,
            "dead": self.dead,
            "child_count": self.child_count,
            "complete": self.complete,
            "succeeded": self.succeeded,
            "died": self.died,
            "invalidated": self.invalidated,
            "created_at": self.created_at,
            "complete_at": self.complete_at,
            "success_at": self.success_at,
            "death_at": self.death_at,
            "expires_in": self.expires_in,
        }

    def __repr__(self) -> str:
        return (
            f"<BatchStatus {self.bid} total={self.total} pending={self.pending} "
            f"failures={self.failures} complete={self.complete}>"
        )


class BatchSet:
    """The index of batches (``batches``), newest first; entries whose batch expired are skipped."""

    index = keys.INDEX

    def __init__(self, wurk: Wurk | None = None) -> None:
        self.wurk = wurk or default_wurk

    def size(self) -> int:
        return int(self.wurk.redis.zcard(self.index))

    def page(self, start: int = 0, count: int = 25) -> tuple[int, list[BatchStatus]]:
        """(index size, one page of statuses, newest first)."""
        pipe = self.wurk.redis.pipeline(transaction=True)
        pipe.zcard(self.index)
        pipe.zrevrange(self.index, start, start + count - 1)
        total, bids = pipe.execute()
        return int(total), [BatchStatus(_text(b), self.wurk) for b in bids]

    def __iter__(self) -> Iterator[BatchStatus]:
        for bid, _ in self.wurk.redis.zscan_iter(self.index, count=500):
            status = BatchStatus(_text(bid), self.wurk)
            if status.exists:
                yield status

    def search(self, text: str, limit: int = 100, scan: int = 20_000) -> list[BatchStatus]:
        """Batches whose bid or description contains ``text`` (case-insensitive), newest first.

        Descriptions are read page by page from the newest batch on, at most ``scan`` of them,
        so a search that matches nothing stays cheap on a full index; a whole bid is found
        wherever it is.
        """
        needle = text.strip().lower()
        found: list[BatchStatus] = []
        if not needle:
            return found
        exact = text.strip()
        if keys.BID.match(exact) and self.wurk.redis.zscore(self.index, exact) is not None:
            status = BatchStatus(exact, self.wurk)
            if status.exists:
                found.append(status)
        start = 0
        while len(found) < limit and start < scan:
            bids = [
                _text(b) for b in self.wurk.redis.zrevrange(self.index, start, min(start + 500, scan) - 1)
            ]
            if not bids:
                break
            pipe = self.wurk.redis.pipeline(transaction=False)
            for bid in bids:
                pipe.hget(keys.batch(bid), "description")
            descriptions = [
                None if isinstance(d, ResponseError) else d for d in pipe.execute(raise_on_error=False)
            ]
            for bid, description in zip(bids, descriptions, strict=True):
                if bid == exact and found and found[0].bid == exact:
                    continue
                if needle in bid.lower() or (
                    description is not None and needle in _text(description).lower()
                ):
                    status = BatchStatus(bid, self.wurk)
                    if status.exists:
                        found.append(status)
                        if len(found) >= limit:
                            break
            start += 500
        return found


class DeadBatchSet(BatchSet):
    """Batches holding dead jobs (``dead-batches``), latest death first."""

    index = keys.DEAD_INDEX
