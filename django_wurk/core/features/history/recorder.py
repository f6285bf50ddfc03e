"""The leader's duty: a snapshot of the fleet's counters every interval, into the stream.

It runs as a leader duty (``periodic/duties.py``) of the process that leads the fleet, so
one process records; the write itself (``history_snapshot.lua``) checks the
lease again and refuses a snapshot closer than half an interval to the newest one, so a
change of leader never records twice. What it reads is the data API's ``Stats`` (the totals,
the sets, busy and processes) and ``queue_summaries`` (each queue's size and latency), a few
pipelines once per interval.

Bad data never stops it: a key of the wrong type (``retry`` a string, the stream itself a
list) is logged at most once every ``COMPLAINT_INTERVAL`` and the snapshot skipped until it
is fixed; a Redis outage ends the pass like any other and is tried again on the next.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.api import Stats, queue_summaries
from django_wurk.core.features.history import keys

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.history")

#: How often the same problem with the history's data is logged (seconds).
COMPLAINT_INTERVAL = 600.0


def gather(wurk: Wurk, leader: str) -> list[tuple[str, str]]:
    """One snapshot's fields (see ``keys``), read now."""
    stats = Stats(wurk)
    queues = sorted(queue_summaries(wurk), key=lambda q: (-q.size, q.name))[: keys.MAX_QUEUES]
    counts = {
        "processed": stats.processed,
        "failed": stats.failed,
        "enqueued": stats.enqueued,
        "scheduled": stats.scheduled_size,
        "retries": stats.retry_size,
        "dead": stats.dead_size,
        "busy": stats.workers_size,
        "processes": stats.processes_size,
    }
    gauges = [
        [q.name[: keys.MAX_NAME], q.size, round(q.latency, 3) if math.isfinite(q.latency) else 0.0]
        for q in queues
    ]
    return [
        ("v", keys.VERSION),
        *((name, str(int(counts[name]))) for name in keys.COUNTS),
        ("queues", wire.dumps(gauges)),
        ("leader", leader),
    ]


class Recorder:
    """One process's history duty; ``tick()`` is called on each pass while it leads."""

    name = "history"

    def __init__(self, wurk: Wurk, identity: str, interval: float, retention: float) -> None:
        self.wurk = wurk
        self.identity = identity
        self.interval = interval
        self.retention = retention
        self.gap_ms = max(int(interval * 500), 1)
        self.retention_ms = max(int(retention * 1000), 1)
        #: Entries are at least a gap apart, so this many cover the whole retention.
        self.max_entries = int(retention * 1000 / self.gap_ms) + 2
        self._next = float("-inf")
        self._complaints: dict[str, float] = {}

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def tick(self) -> None:
        if not self.due():
            return
        self._next = time.monotonic() + self.interval
        self.record()

    def record(self) -> str | None:
        """Write a snapshot now if the script lets this process; its ID, or None."""
        try:
            fields = gather(self.wurk, self.identity)
            status, detail = self.wurk.scripts.record_history(
                keys.STREAM,
                self.wurk.config.leader_key,
                self.identity,
                self.gap_ms,
                self.retention_ms,
                self.max_entries,
                fields,
            )
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            self._complain(f"a key the snapshot reads holds another type ({exc}); the snapshot is skipped")
            return None
        if status == 1:
            logger.debug("history snapshot %s written", detail)
            return detail
        if status == 2:
            # The previous leader wrote one moments ago: try again once the gap has passed
            # (less than half an interval: sooner than the schedule would).
            self._next = time.monotonic() + int(detail) / 1000
        elif status == 3:
            self._complain(
                f"{keys.STREAM} is a {detail}, not a stream: no snapshot is kept until it is deleted"
            )
        elif status == 4:
            self._complain(
                f"{keys.STREAM}'s newest entry {detail} is dated in the future: no snapshot can be "
                "added after it until it is deleted (XDEL) or the key removed"
            )
        return None

    def _complain(self, message: str) -> None:
        at = time.monotonic()
        last = self._complaints.get(message)
        if last is not None and at - last < COMPLAINT_INTERVAL:
            return
        self._complaints[message] = at
        logger.error("historical metrics: %s", message)
