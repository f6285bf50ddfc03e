"""Reading the snapshots back: ``History(wurk).recent(seconds)``, typed rows, oldest first.

Whatever sits in ``history:metrics`` is read, never trusted: a field that is not a count
(``abc``, ``-1``, 400 digits, bytes that are not UTF-8) reads as ``None``; a ``queues``
field that is not the JSON list it should be reads as no queues, and a malformed item in it
is skipped; an entry dated outside what a ``datetime`` holds is skipped; a key of another
type reads as no history. So the dashboard can always draw what it gets.

The deltas (``processed_delta``, ``failed_delta``) are computed here, between consecutive
snapshots, from the running totals the stream keeps: they stay right across a change of
leader and a missed snapshot (the delta then spans the gap), and read as ``None`` for the
first row and after the totals went down (``Stats.reset``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.api import QueueGauge
from django_wurk.core.engine import Wurk
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.history import keys

#: The most snapshots one read returns (the newest ones): 7 days at one every 30 s is 20,160.
MAX_ROWS = 25_000
#: Longer text (a queue name, the leader's identity) is cut.
MAX_TEXT = keys.MAX_NAME
#: Latencies above this (about 31 years) are not ages anyone's job had.
MAX_LATENCY = 1e9
#: How far past Redis's clock an entry is still read (ms).
FUTURE_SLACK_MS = 60_000
#: The latest moment a ``datetime`` can hold, in ms since the epoch.
_MAX_MS = 253_402_300_799_999


@dataclass(frozen=True)
class Snapshot:
    """The fleet at one moment, as the leader recorded it; a count is ``None`` when unreadable."""

    #: The stream entry's ID (``<ms>-<seq>``).
    id: str
    #: When it was taken, by Redis's clock.
    at: datetime
    processed: int | None = None
    failed: int | None = None
    enqueued: int | None = None
    scheduled: int | None = None
    retries: int | None = None
    dead: int | None = None
    busy: int | None = None
    processes: int | None = None
    queues: tuple[QueueGauge, ...] = field(default=())
    #: The identity of the process that wrote it.
    leader: str = ""
    #: Executions (failures included) since the previous snapshot; ``None`` for the first.
    processed_delta: int | None = None
    #: Failures since the previous snapshot; ``None`` for the first.
    failed_delta: int | None = None

    def queue(self, name: str) -> QueueGauge | None:
        return next((q for q in self.queues if q.name == name), None)


def _text(raw: Any) -> str:
    return wire.display_text(raw, MAX_TEXT)


def _count(raw: Any) -> int | None:
    """A count as the recorder writes it (decimal digits, below 2**63); ``None`` otherwise."""
    if isinstance(raw, bytes):
        if not raw.isdigit() or len(raw) > 19:
            return None
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        return None
    return raw if 0 <= raw < 2**63 else None


def _latency(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    value = float(raw)
    return value if math.isfinite(value) and 0 <= value <= MAX_LATENCY else None


def _queues(raw: Any) -> tuple[QueueGauge, ...]:
    if not isinstance(raw, bytes) or len(raw) > 1_000_000:
        return ()
    try:
        items = wire.decode_json(raw, "queues")
    except ValueError:
        return ()
    if not isinstance(items, list):
        return ()
    out = []
    for item in items[: keys.MAX_QUEUES]:
        if not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str):
            continue
        size, latency = _count(item[1]), _latency(item[2])
        if size is None or latency is None:
            continue
        out.append(QueueGauge(item[0][:MAX_TEXT], size, latency))
    return tuple(out)


def _moment(entry_id: str) -> datetime | None:
    ms, _, _ = entry_id.partition("-")
    if not ms.isdigit() or len(ms) > 16 or int(ms) > _MAX_MS:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, UTC)


def parse(entry_id: bytes | str, fields: Mapping[Any, Any]) -> Snapshot | None:
    """One stream entry as a ``Snapshot``; ``None`` when its ID names no usable time."""
    ident = _text(entry_id)
    at = _moment(ident)
    if at is None:
        return None
    values = {_text(k): v for k, v in fields.items()} if isinstance(fields, Mapping) else {}
    counts = {name: _count(values.get(name)) for name in keys.COUNTS}
    return Snapshot(
        id=ident, at=at, queues=_queues(values.get("queues")), leader=_text(values.get("leader")), **counts
    )


def _delta(now: int | None, before: int | None) -> int | None:
    return now - before if now is not None and before is not None and now >= before else None


def with_deltas(rows: list[Snapshot]) -> list[Snapshot]:
    """``rows`` (oldest first) with each one's deltas from the row before it."""
    out: list[Snapshot] = []
    for i, row in enumerate(rows):
        if i == 0:
            out.append(row)
            continue
        prev = rows[i - 1]
        out.append(
            replace(
                row,
                processed_delta=_delta(row.processed, prev.processed),
                failed_delta=_delta(row.failed, prev.failed),
            )
        )
    return out


class History:
    """The recorded snapshots (``docs/metrics.md``)."""

    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk

    def recent(self, seconds: float = 3600, limit: int = MAX_ROWS) -> list[Snapshot]:
        """The snapshots of the last ``seconds`` (by Redis's clock), oldest first; at most
        ``limit`` of them, the newest."""
        if not seconds > 0:
            raise ValueError(f"seconds must be greater than 0, got {seconds!r}")
        limit = max(1, min(int(limit), MAX_ROWS))
        redis = self.wurk.redis
        now_s, now_us = redis.time()
        now = int(now_s) * 1000 + int(now_us) // 1000
        start = max(now - int(seconds * 1000), 0)
        try:
            # Not past now (and a minute of slack): an entry dated in the future is junk.
            raw = redis.xrevrange(keys.STREAM, str(now + FUTURE_SLACK_MS), str(start), count=limit)
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return []
        rows = [row for row in (parse(i, f) for i, f in reversed(raw)) if row is not None]
        return with_deltas(rows)

    def sample(self, seconds: float = 3600, points: int = 240) -> list[Snapshot]:
        """At most ``points`` snapshots spread over the last ``seconds``, oldest first: the
        period cut into ``points`` equal slots, the newest snapshot of each (an empty slot
        gives none). One round trip however long the period, and only what is returned is
        parsed: what a chart of days needs without reading 20,000 entries. The deltas are
        between the returned rows, so they add up to every execution of the period."""
        if not seconds > 0:
            raise ValueError(f"seconds must be greater than 0, got {seconds!r}")
        points = max(1, min(int(points), MAX_ROWS))
        redis = self.wurk.redis
        now_s, now_us = redis.time()
        now = int(now_s) * 1000 + int(now_us) // 1000
        span = int(seconds * 1000)
        edges = [max(now - span + span * i // points, 0) for i in range(points + 1)]
        pipe = redis.pipeline(transaction=False)
        for i in range(points):
            # The newest entry of the slot [edges[i], edges[i + 1]); the last slot ends at now.
            end = str(edges[i + 1] - 1) if i < points - 1 else str(now + FUTURE_SLACK_MS)
            pipe.xrevrange(keys.STREAM, end, str(edges[i]), count=1)
        replies = pipe.execute(raise_on_error=False)
        rows = []
        for reply in replies:
            if isinstance(reply, ResponseError):
                if "WRONGTYPE" not in str(reply):
                    raise reply
                return []
            if reply:
                row = parse(*reply[0])
                if row is not None:
                    rows.append(row)
        return with_deltas(rows)

    def latest(self) -> Snapshot | None:
        """The newest snapshot (not dated in the future), or ``None``."""
        redis = self.wurk.redis
        now_s, now_us = redis.time()
        end = int(now_s) * 1000 + int(now_us) // 1000 + FUTURE_SLACK_MS
        try:
            raw = redis.xrevrange(keys.STREAM, str(end), "-", count=1)
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return None
        return parse(*raw[0]) if raw else None

    def size(self) -> int:
        """How many snapshots are kept (0 when the key is of another type)."""
        try:
            return int(self.wurk.redis.xlen(keys.STREAM))
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return 0
