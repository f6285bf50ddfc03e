"""Per-job metrics in both Sidekiq layouts: 8's ``j|YYMMDD|H:MM`` and 7.x's ``j|YYYYMMDD|H:M``.

Workers write what ``METRICS_LAYOUT`` (or, in ``auto``, the process set) says the fleet's
readers read; our reader reads both and counts each job once. The live check against Sidekiq
7.3 and 8.0 themselves is tests/interop/test_fleet.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core import keys, metrics
from django_wurk.core.worker.metrics_layouts import BOTH, MetricsLayouts, fleet_has_sidekiq7
from django_wurk.core.worker.stats import ONLY_8, SIDEKIQ7, Stats, queue_flush

#: 09:05 on the 3rd: every padding rule of both layouts shows.
NOW = datetime(2026, 12, 3, 9, 5, 30, tzinfo=UTC)


def flush(r: Any, layouts: frozenset[str], runs: list[tuple[str, float, bool, datetime]]) -> None:
    stats = Stats()
    for name, ms, failed, at in runs:
        stats.record(name, ms, failed, at.timestamp())
    pipe = r.pipeline(transaction=False)
    queue_flush(pipe, *stats.drain(), layouts=layouts)
    pipe.execute()


def test_the_sidekiq_7_key_names() -> None:
    assert keys.metrics_minute_v7(NOW) == "j|20261203|9:5"
    assert keys.histogram_v7("Py::Echo", NOW) == "Py::Echo-03-09:5"
    assert keys.metrics_minute(NOW) == "j|261203|9:05"
    assert keys.histogram("Py::Echo", NOW) == "h|Py::Echo-3-9:5"


def test_writing_both_layouts_writes_each_and_our_reader_counts_a_job_once(wurk: Wurk, r: Any) -> None:
    flush(r, BOTH, [("A", 10, False, NOW), ("A", 5, True, NOW), ("A", 40, False, NOW - timedelta(minutes=1))])
    assert r.hgetall("j|20261203|9:5") == {b"A|p": b"2", b"A|f": b"1", b"A|ms": b"10"}
    assert r.hgetall("j|261203|9:05") == {b"A|p": b"2", b"A|f": b"1", b"A|ms": b"10"}
    assert r.exists("A-03-09:5", "h|A-3-9:5") == 2
    assert 0 < r.ttl("j|20261203|9:5") <= keys.METRICS_MINUTE_TTL
    result = metrics.overview(60, NOW, wurk=wurk)
    [a] = result.classes
    assert (a.processed, a.failed, a.ms) == (3, 1, 50)
    detail = metrics.job_class("A", 60, NOW, wurk=wurk)
    assert (detail.metrics.processed, detail.histogram_total) == (3, 2)


def test_only_sidekiq_7_s_layout_when_asked(wurk: Wurk, r: Any) -> None:
    flush(r, frozenset({SIDEKIQ7}), [("A", 10, False, NOW)])
    assert r.exists("j|20261203|9:5") and not r.exists("j|261203|9:05", "j|261203|9:0")
    assert not r.keys("wurk-metrics-copied*")
    assert metrics.overview(60, NOW, wurk=wurk).processed == 1


def test_a_job_sidekiq_7_ran_counts_beside_ours(wurk: Wurk, r: Any) -> None:
    flush(r, ONLY_8, [("A", 10, False, NOW)])
    # What Sidekiq 7.3's ExecutionTracker#flush and Histogram#persist write for two runs of Rb.
    r.hset("j|20261203|9:5", mapping={"Rb|p": 2, "Rb|ms": 30, "A|p": 1, "A|ms": 7})
    r.execute_command("BITFIELD", "Rb-03-09:5", "OVERFLOW", "SAT", "INCRBY", "u16", "#0", 2)
    result = {c.name: (c.processed, c.ms) for c in metrics.overview(60, NOW, wurk=wurk).classes}
    assert result == {"A": (2, 17), "Rb": (2, 30)}
    assert metrics.job_class("Rb", 60, NOW, wurk=wurk).histogram[0] == 2


def test_longer_periods_read_the_rollups_only(wurk: Wurk, r: Any) -> None:
    flush(r, BOTH, [("A", 10, False, NOW)])
    assert metrics.overview(1440, NOW, wurk=wurk).processed == 1


def write_process(r: Any, identity: str, info: Any) -> None:
    r.sadd("processes", identity)
    r.hset(identity, mapping={"info": info if isinstance(info, str) else json.dumps(info)})


def test_auto_adds_sidekiq_7_s_layout_while_a_sidekiq_7_process_is_in_the_fleet(wurk: Wurk, r: Any) -> None:
    write_process(r, "py:1:a", {"version": "0.1.0"})
    write_process(r, "rb8:1:b", {"version": "8.0.10"})
    write_process(r, "junk:1:c", "not json")
    r.sadd("processes", "no-hash")
    assert not fleet_has_sidekiq7(r)
    layouts = MetricsLayouts("auto")
    assert layouts.current(r) == ONLY_8
    write_process(r, "rb7:1:d", {"version": "7.3.10"})
    assert fleet_has_sidekiq7(r)
    assert layouts.current(r) == ONLY_8  # looked again only a minute later
    layouts._checked_at -= 61
    assert layouts.current(r) == BOTH


@pytest.mark.parametrize(
    ("setting", "expected"), [("8", ONLY_8), ("7", frozenset({SIDEKIQ7})), ("both", BOTH)]
)
def test_a_fixed_layout_reads_no_process(r: Any, setting: str, expected: frozenset[str]) -> None:
    assert MetricsLayouts(setting).current(None) == expected
