"""In-memory execution counters, flushed to Redis by the heartbeat.

Counting in memory keeps the per-job hot path free of Redis writes; the heartbeat turns
the counts into Sidekiq's keys: ``stat:processed``/``stat:failed`` with their daily
twins, and Sidekiq 8's per-class metrics (minutely and ten-minute hashes of
``<class>|p``, ``|f``, ``|ms``, and a 26-bucket execution-time histogram).
The two totals are also flushed between beats, within a second of a job ending
(``drain_totals``), so a dashboard polling them draws a steady line rather than a spike
every 10 seconds; the per-class metrics, read per minute, wait for the beat.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django_wurk.core import keys


def histogram_bucket(ms: float) -> int:
    return bisect.bisect_right(keys.HISTOGRAM_BOUNDS, ms)


@dataclass
class ClassMetrics:
    processed: int = 0
    failed: int = 0
    ms: int = 0
    buckets: dict[int, int] = field(default_factory=lambda: defaultdict(int))


class Stats:
    """Thread-safe counters; ``drain()`` hands the totals to the heartbeat and resets them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.processed = 0
        self.failed = 0
        # (minute, class) -> metrics; the minute is whole epoch minutes (a datetime only at flush).
        self._metrics: dict[tuple[int, str], ClassMetrics] = {}

    def record(self, job_class: str, elapsed_ms: float, failed: bool, at: float) -> None:
        minute = int(at // 60)
        with self._lock:
            self.processed += 1
            m = self._metrics.get((minute, job_class))
            if m is None:
                m = self._metrics[(minute, job_class)] = ClassMetrics()
            m.processed += 1
            if failed:
                self.failed += 1
                m.failed += 1
            else:
                m.ms += int(elapsed_ms)
                m.buckets[histogram_bucket(elapsed_ms)] += 1

    def drain(self) -> tuple[int, int, dict[tuple[int, str], ClassMetrics]]:
        with self._lock:
            totals = (self.processed, self.failed, self._metrics)
            self.processed = 0
            self.failed = 0
            self._metrics = {}
        return totals

    def drain_totals(self) -> tuple[int, int, dict[tuple[int, str], ClassMetrics]]:
        """Only ``stat:processed``/``stat:failed``'s counts, in ``drain()``'s shape (no metrics)."""
        with self._lock:
            totals: tuple[int, int, dict[tuple[int, str], ClassMetrics]] = (self.processed, self.failed, {})
            self.processed = 0
            self.failed = 0
        return totals

    def restore(self, processed: int, failed: int, metrics: dict[tuple[int, str], ClassMetrics]) -> None:
        """Put counts back after a failed flush, so an outage delays stats instead of losing them."""
        with self._lock:
            self.processed += processed
            self.failed += failed
            for k, m in metrics.items():
                cur = self._metrics.setdefault(k, ClassMetrics())
                cur.processed += m.processed
                cur.failed += m.failed
                cur.ms += m.ms
                for b, n in m.buckets.items():
                    cur.buckets[b] += n


#: Sidekiq 8's per-job metrics layout, and Sidekiq 7.x's (``METRICS_LAYOUT``).
SIDEKIQ8 = "8"
SIDEKIQ7 = "7"
ONLY_8 = frozenset({SIDEKIQ8})


def queue_flush(
    pipe: Any,
    processed: int,
    failed: int,
    metrics: dict[tuple[int, str], ClassMetrics],
    layouts: frozenset[str] = ONLY_8,
) -> None:
    """Add the flush commands for drained counts to a pipeline.

    ``layouts`` says which Sidekiq versions' per-job metrics keys to write (``"8"``, ``"7"``).
    Writing both, the counts copied into 7's keys are also added to ``keys.metrics_copies``
    and ``keys.histogram_copies``, which our reader subtracts: each job is counted once by
    every reader, Sidekiq 7's, Sidekiq 8's and ours.
    """
    today = datetime.now(UTC).date().isoformat()
    if processed:
        pipe.incrby(keys.STAT_PROCESSED, processed)
        pipe.incrby(keys.daily_stat("processed", today), processed)
        pipe.expire(keys.daily_stat("processed", today), keys.DAILY_STAT_TTL)
    if failed:
        pipe.incrby(keys.STAT_FAILED, failed)
        pipe.incrby(keys.daily_stat("failed", today), failed)
        pipe.expire(keys.daily_stat("failed", today), keys.DAILY_STAT_TTL)
    touched: dict[str, int] = {}
    copied = SIDEKIQ8 in layouts and SIDEKIQ7 in layouts
    for (epoch_minute, job_class), m in metrics.items():
        minute = datetime.fromtimestamp(epoch_minute * 60, UTC)
        hashes: list[tuple[str, int]] = []
        histograms: list[str] = []
        if SIDEKIQ8 in layouts:
            hashes += [(keys.metrics_minute(minute), keys.METRICS_MINUTE_TTL),
                       (keys.metrics_rollup(minute), keys.METRICS_ROLLUP_TTL)]  # fmt: skip
            histograms.append(keys.histogram(job_class, minute))
        if SIDEKIQ7 in layouts:
            hashes.append((keys.metrics_minute_v7(minute), keys.METRICS_MINUTE_TTL))
            histograms.append(keys.histogram_v7(job_class, minute))
        if copied:
            hashes.append((keys.metrics_copies(minute), keys.METRICS_MINUTE_TTL))
            histograms.append(keys.histogram_copies(job_class, minute))
        for key, ttl in hashes:
            pipe.hincrby(key, f"{job_class}|p", m.processed)
            if m.failed:
                pipe.hincrby(key, f"{job_class}|f", m.failed)
            if m.ms:
                pipe.hincrby(key, f"{job_class}|ms", m.ms)
            touched[key] = ttl
        if m.buckets:
            args: list[Any] = ["OVERFLOW", "SAT"]
            for bucket, n in sorted(m.buckets.items()):
                args += ["INCRBY", "u16", f"#{bucket}", n]
            for hkey in histograms:
                pipe.execute_command("BITFIELD", hkey, *args)
                touched[hkey] = keys.METRICS_MINUTE_TTL
    for key, ttl in touched.items():
        pipe.expire(key, ttl)
