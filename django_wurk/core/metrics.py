"""Read Sidekiq 8's execution metrics back: per-class totals, time series and histograms.

Workers (ours and Sidekiq 8's) write, per minute and per job class, ``<class>|p``
(executions, failures included), ``<class>|f`` (failures) and ``<class>|ms`` (milliseconds
spent in successful executions) into the minutely hash ``j|YYMMDD|H:MM`` (kept 8 hours)
and the ten-minute rollup ``j|YYMMDD|H:M`` (kept 3 days), plus a 26-bucket execution-time
histogram ``h|<class>-D-H:M`` (kept 8 hours). See ``django_wurk.core.worker.stats``.

Like Sidekiq's Web UI, periods of up to 8 hours read the minutely hashes (one per minute)
and longer periods the rollups (one per ten minutes); every read is one pipeline, so a
period costs one round trip whatever its length. Nothing here imports Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django_wurk.core import keys
from django_wurk.core.engine import Wurk
from django_wurk.core.engine import wurk as default_wurk

#: The longest period the minutely hashes (and the histograms) cover.
MINUTELY_LIMIT = keys.METRICS_MINUTE_TTL // 60
#: The longest period the ten-minute rollups cover.
ROLLUP_LIMIT = keys.METRICS_ROLLUP_TTL // 60
#: Number of histogram buckets: one per upper bound, plus the unbounded last one.
HISTOGRAM_SIZE = len(keys.HISTOGRAM_BOUNDS) + 1


def histogram_labels() -> list[str]:
    """Human labels of the histogram buckets: ``< 20 ms`` ... ``≥ 335 s``."""

    def fmt(ms: int) -> str:
        return f"{ms} ms" if ms < 1000 else f"{ms / 1000:g} s"

    return [f"< {fmt(b)}" for b in keys.HISTOGRAM_BOUNDS] + [f"≥ {fmt(keys.HISTOGRAM_BOUNDS[-1])}"]


@dataclass
class Sample:
    """One class in one time bucket."""

    processed: int = 0
    failed: int = 0
    ms: int = 0


@dataclass
class ClassMetrics:
    """One job class over a period: totals plus one ``Sample`` per time bucket (oldest first)."""

    name: str
    processed: int = 0
    failed: int = 0
    ms: int = 0
    series: list[Sample] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return max(self.processed - self.failed, 0)

    @property
    def seconds(self) -> float:
        """Total time of the successful executions, in seconds."""
        return self.ms / 1000.0

    @property
    def average_ms(self) -> float:
        """Average time of a successful execution (failures record no time), as Sidekiq computes it."""
        return self.ms / self.succeeded if self.succeeded else 0.0


@dataclass
class Period:
    """Which keys a period reads: ``buckets`` are the start times of its slots, oldest first."""

    minutes: int
    bucket_seconds: int
    buckets: list[datetime]

    @property
    def minutely(self) -> bool:
        return self.bucket_seconds == 60

    @property
    def starts_at(self) -> datetime:
        return self.buckets[0]

    def key(self, at: datetime) -> str:
        return keys.metrics_minute(at) if self.minutely else keys.metrics_rollup(at)


def period(minutes: int, now: datetime | None = None) -> Period:
    """The slots covering the last ``minutes`` (the current, still filling slot included)."""
    if not 1 <= minutes <= ROLLUP_LIMIT:
        raise ValueError(f"minutes must be between 1 and {ROLLUP_LIMIT}")
    current = (now or datetime.now(UTC)).astimezone(UTC).replace(second=0, microsecond=0)
    if minutes <= MINUTELY_LIMIT:
        slots = [current - timedelta(minutes=i) for i in range(minutes)]
        return Period(minutes, 60, slots[::-1])
    current = current.replace(minute=current.minute - current.minute % 10)
    count = -(-minutes // 10)
    slots = [current - timedelta(minutes=10 * i) for i in range(count)]
    return Period(minutes, 600, slots[::-1])


def _int(value: bytes | str | None) -> int:
    """A counter as HINCRBY keeps it (0 to 2**63 - 1); anything else written there reads as 0,
    so a hand-written "abc" or a 4000-digit number cannot break the sums and charts."""
    try:
        number = int(value or 0)
    except (TypeError, ValueError):
        return 0
    return number if 0 <= number < 2**63 else 0


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


@dataclass
class Overview:
    """Every class that ran in a period, busiest first."""

    period: Period
    classes: list[ClassMetrics]

    @property
    def processed(self) -> int:
        return sum(c.processed for c in self.classes)

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.classes)


def overview(minutes: int = 60, now: datetime | None = None, wurk: Wurk = default_wurk) -> Overview:
    """Totals and per-slot samples of every job class over the last ``minutes``."""
    span = period(minutes, now)
    pipe = wurk.redis.pipeline(transaction=False)
    for at in span.buckets:
        pipe.hgetall(span.key(at))
    found: dict[str, ClassMetrics] = {}
    for index, fields in enumerate(pipe.execute()):
        for raw_field, raw_value in fields.items():
            name, sep, kind = _text(raw_field).rpartition("|")
            if not sep or kind not in ("p", "f", "ms"):
                continue
            metrics = found.get(name)
            if metrics is None:
                metrics = found[name] = ClassMetrics(name, series=[Sample() for _ in span.buckets])
            value = _int(raw_value)
            sample = metrics.series[index]
            if kind == "p":
                metrics.processed += value
                sample.processed += value
            elif kind == "f":
                metrics.failed += value
                sample.failed += value
            else:
                metrics.ms += value
                sample.ms += value
    ordered = sorted(found.values(), key=lambda m: (-m.processed, -m.ms, m.name))
    return Overview(span, ordered)


@dataclass
class ClassDetail:
    """One class over a period, with its execution-time histogram where one is kept."""

    metrics: ClassMetrics
    period: Period
    #: Executions per histogram bucket over the period (or over the last 8 hours of it).
    histogram: list[int]
    #: Where the histogram starts: the period's start, or 8 hours ago for a longer period.
    histogram_since: datetime

    @property
    def histogram_total(self) -> int:
        return sum(self.histogram)


def decode_histogram(raw: bytes | None) -> list[int]:
    """The 26 big-endian unsigned 16-bit counters of a histogram string (missing ones are 0)."""
    data = raw or b""
    return [int.from_bytes(data[2 * i : 2 * i + 2].ljust(2, b"\0"), "big") for i in range(HISTOGRAM_SIZE)]


def job_class(
    name: str, minutes: int = 60, now: datetime | None = None, wurk: Wurk = default_wurk
) -> ClassDetail:
    """One class's totals, per-slot samples and histogram over the last ``minutes``.

    Histograms are kept per minute for 8 hours, so a longer period gets the histogram of
    its last 8 hours (``histogram_since`` says from when).
    """
    span = period(minutes, now)
    fields = (f"{name}|p", f"{name}|f", f"{name}|ms")
    pipe = wurk.redis.pipeline(transaction=False)
    for at in span.buckets:
        pipe.hmget(span.key(at), *fields)
    minutely = period(min(minutes, MINUTELY_LIMIT), now)
    for at in minutely.buckets:
        # GET reads the same bytes as Sidekiq's BITFIELD_RO ... GET u16 #i, on any server version.
        pipe.get(keys.histogram(name, at))
    replies = pipe.execute()
    metrics = ClassMetrics(name)
    for p, f, ms in replies[: len(span.buckets)]:
        sample = Sample(_int(p), _int(f), _int(ms))
        metrics.series.append(sample)
        metrics.processed += sample.processed
        metrics.failed += sample.failed
        metrics.ms += sample.ms
    histogram = [0] * HISTOGRAM_SIZE
    for raw in replies[len(span.buckets) :]:
        for i, count in enumerate(decode_histogram(raw)):
            histogram[i] += count
    return ClassDetail(metrics, span, histogram, minutely.starts_at)
