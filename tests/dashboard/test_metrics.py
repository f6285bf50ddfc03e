"""``django_wurk.core.metrics`` reads back what the worker's stats flush writes (Sidekiq 8's keys)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core import metrics
from django_wurk.core.worker.stats import Stats, queue_flush
from django_wurk.dashboard import charts

NOW = datetime(2026, 11, 29, 9, 5, 30, tzinfo=UTC)


def flush(r: Any, runs: list[tuple[str, float, bool, datetime]]) -> None:
    stats = Stats()
    for name, ms, failed, at in runs:
        stats.record(name, ms, failed, at.timestamp())
    pipe = r.pipeline(transaction=False)
    queue_flush(pipe, *stats.drain())
    pipe.execute()


def test_periods_up_to_8_hours_read_minutely_keys() -> None:
    span = metrics.period(60, NOW)
    assert span.minutely and len(span.buckets) == 60
    assert span.buckets[-1] == datetime(2026, 11, 29, 9, 5, tzinfo=UTC)
    assert span.buckets[0] == datetime(2026, 11, 29, 8, 6, tzinfo=UTC)
    assert span.key(span.buckets[-1]) == "j|261129|9:05"
    assert len(metrics.period(480, NOW).buckets) == 480


def test_longer_periods_read_the_ten_minute_rollups() -> None:
    span = metrics.period(1440, NOW)
    assert not span.minutely and len(span.buckets) == 144
    assert span.buckets[-1] == datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    assert span.key(span.buckets[-1]) == "j|261129|9:0"
    with pytest.raises(ValueError):
        metrics.period(0, NOW)
    with pytest.raises(ValueError):
        metrics.period(metrics.ROLLUP_LIMIT + 1, NOW)


def test_overview_totals_and_series(wurk: Wurk, r: Any) -> None:
    flush(
        r,
        [
            ("A", 10, False, NOW),
            ("A", 30, False, NOW),
            ("A", 99, True, NOW),
            ("A", 50, False, NOW - timedelta(minutes=2)),
            ("B|odd", 1000, False, NOW - timedelta(minutes=30)),
            ("C", 5, False, NOW - timedelta(minutes=90)),  # outside the hour
        ],
    )
    result = metrics.overview(60, NOW, wurk=wurk)
    assert [c.name for c in result.classes] == ["A", "B|odd"]
    a = result.classes[0]
    assert (a.processed, a.failed, a.ms) == (4, 1, 90)
    assert a.average_ms == 30.0 and a.succeeded == 3 and a.seconds == 0.09
    assert [s.processed for s in a.series][-3:] == [1, 0, 3]
    assert len(a.series) == 60 and result.processed == 5 and result.failed == 1
    # The ten-minute rollups see the class from 90 minutes ago too.
    assert {c.name for c in metrics.overview(1440, NOW, wurk=wurk).classes} == {"A", "B|odd", "C"}


def test_class_detail_with_histogram(wurk: Wurk, r: Any) -> None:
    flush(r, [("A", 10, False, NOW), ("A", 25, False, NOW), ("A", 400_000, False, NOW - timedelta(minutes=5)),
              ("A", 7, True, NOW)])  # fmt: skip
    detail = metrics.job_class("A", 60, NOW, wurk=wurk)
    assert (detail.metrics.processed, detail.metrics.failed) == (4, 1)
    assert detail.histogram[0] == 1 and detail.histogram[1] == 1 and detail.histogram[-1] == 1
    assert detail.histogram_total == 3  # failures record no time
    day = metrics.job_class("A", 1440, NOW, wurk=wurk)
    assert day.metrics.processed == 4 and day.histogram_total == 3
    assert day.histogram_since == NOW.replace(second=0) - timedelta(minutes=479)
    assert metrics.job_class("nobody", 60, NOW, wurk=wurk).histogram_total == 0


def test_histogram_decoding_and_labels() -> None:
    assert metrics.decode_histogram(None) == [0] * 26
    assert metrics.decode_histogram(b"\x00\x05\x01\x00")[:3] == [5, 256, 0]
    assert metrics.decode_histogram(b"\x00\x05\x01")[:2] == [5, 256]  # a short string is zero-padded
    labels = metrics.histogram_labels()
    assert (
        len(labels) == 26 and labels[0] == "< 20 ms" and labels[10] == "< 1.1 s" and labels[-1] == "≥ 335 s"
    )


def test_charts_escape_text_and_scale_axes() -> None:
    svg = charts.line_chart(["<b>"], [charts.Series("<script>x</script>", [3])], title="<t>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "&lt;b&gt;" in svg
    assert charts.nice_ceiling(0) == 4 and charts.nice_ceiling(23) == 24 and charts.nice_ceiling(2301) == 2400
    bars = charts.bar_chart(["<i>"], [2])
    assert "&lt;i&gt;" in bars and "<i>" not in bars
    assert charts.compact(1234) == "1.23k" and charts.compact(5) == "5"
