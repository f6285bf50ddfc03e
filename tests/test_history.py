"""Historical metrics: the leader's snapshots in ``history:metrics``, their trims, and reading them.

The recorder runs as a leader duty (it needs the election, not periodic jobs); these tests
drive it through real campaigns (two members, one records), through a launcher with no
periodic jobs at all, and directly (``Recorder.record``) where one step at a time shows the rule.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import History, Snapshot, Stats, current_leader
from django_wurk.conf import Settings
from django_wurk.core import keys as core_keys
from django_wurk.core.config import ConfigError
from django_wurk.core.feature import Feature, Plug
from django_wurk.core.features import history
from django_wurk.core.features.history import keys
from django_wurk.core.features.history.reader import with_deltas
from django_wurk.core.features.history.recorder import Recorder
from django_wurk.core.features.periodic import leadership
from django_wurk.core.features.periodic.duties import while_leading
from django_wurk.core.worker.launcher import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.test_periodic_leader import Member

DAY = 86_400.0


def lead(r: Any, identity: str) -> None:
    r.set(core_keys.LEADER, identity, ex=60)


def entries(r: Any) -> list[tuple[str, dict[str, str]]]:
    return [(i.decode(), {k.decode(): v.decode() for k, v in f.items()}) for i, f in r.xrange(keys.STREAM)]


def server_ms(r: Any) -> int:
    s, us = r.time()
    return int(s) * 1000 + int(us) // 1000


def test_the_leader_records_the_fleet_s_counters_and_queues(wurk: Wurk, r: Any) -> None:
    r.mset({core_keys.STAT_PROCESSED: 120, core_keys.STAT_FAILED: 7})
    for _ in range(3):
        jobs.echo.set(queue="mail").perform_async("x")
    jobs.echo.perform_async("y")
    jobs.echo.perform_in(600, "later")
    r.zadd(core_keys.RETRY, {"r1": 1, "r2": 2})
    r.zadd(core_keys.DEAD, {"d1": 1})
    lead(r, "host:1:a")
    recorder = Recorder(wurk, "host:1:a", interval=30, retention=DAY)
    entry_id = recorder.record()
    assert entry_id is not None
    [(stored_id, fields)] = entries(r)
    assert stored_id == entry_id and abs(int(entry_id.split("-")[0]) - server_ms(r)) < 5000
    assert fields["v"] == "1" and fields["leader"] == "host:1:a"
    assert {k: fields[k] for k in keys.COUNTS} == {
        "processed": "120", "failed": "7", "enqueued": "4", "scheduled": "1",
        "retries": "2", "dead": "1", "busy": "0", "processes": "0",
    }  # fmt: skip
    queues = json.loads(fields["queues"])
    assert [(q[0], q[1]) for q in queues] == [("mail", 3), ("default", 1)]  # the largest first
    assert all(isinstance(q[2], float) and q[2] >= 0 for q in queues)
    [snap] = History(wurk).recent(60)
    assert (snap.processed, snap.failed, snap.enqueued, snap.retries, snap.dead) == (120, 7, 4, 2, 1)
    assert snap.queue("mail").size == 3 and snap.leader == "host:1:a"  # type: ignore[union-attr]
    assert snap.processed_delta is None  # nothing before it
    assert History(wurk).latest() == snap and History(wurk).size() == 1


def test_a_process_that_does_not_hold_the_lease_writes_nothing(wurk: Wurk, r: Any) -> None:
    lead(r, "host:1:a")
    assert Recorder(wurk, "host:2:b", 30, DAY).record() is None
    r.delete(core_keys.LEADER)
    assert Recorder(wurk, "host:2:b", 30, DAY).record() is None
    assert not r.exists(keys.STREAM)


def test_a_new_leader_waits_half_an_interval_after_the_last_snapshot(wurk: Wurk, r: Any) -> None:
    lead(r, "host:1:a")
    assert Recorder(wurk, "host:1:a", 1.0, DAY).record() is not None
    lead(r, "host:2:b")  # handed over at once
    taker = Recorder(wurk, "host:2:b", 1.0, DAY)
    assert taker.record() is None and r.xlen(keys.STREAM) == 1
    assert not taker.due()  # it tries again when the gap has passed, not a whole interval later
    wait_for(taker.due, timeout=2)
    assert taker.record() is not None
    first, second = (int(i.split("-")[0]) for i, _ in entries(r))
    assert second - first >= 500


def test_retention_trims_by_age_and_by_count(wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    r.xadd(keys.STREAM, {"v": "1", "processed": "1"}, id="1000-0")  # 1970
    r.xadd(keys.STREAM, {"v": "1", "processed": "2"}, id=f"{now - 3_600_000}-0")  # an hour ago
    r.xadd(keys.STREAM, {"v": "1", "processed": "3"}, id=f"{now - 60_000}-0")  # a minute ago
    lead(r, "host:1:a")
    assert Recorder(wurk, "host:1:a", interval=10, retention=600).record() is not None
    assert [f["processed"] for _, f in entries(r)] == ["3", "0"]
    # Entries at least a gap (half an interval) apart: retention / gap + 2 cover the retention.
    recorder = Recorder(wurk, "host:1:a", interval=10, retention=60)
    assert recorder.max_entries == 14
    r.delete(keys.STREAM)
    base = server_ms(r) - 40_000
    for n in range(30):
        r.xadd(keys.STREAM, {"processed": str(n)}, id=f"{base + n}-0")
    assert recorder.record() is not None
    kept = entries(r)
    assert len(kept) == 14 and kept[-1][1]["leader"] == "host:1:a" and kept[0][1]["processed"] == "17"


def test_two_campaigners_one_records_every_interval(wurk: Wurk, r: Any) -> None:
    wurk.use(leadership.feature(2.0), history.feature(interval=0.3, retention=DAY))
    services = [Member(wurk, f"host:{i}:n") for i in range(2)]
    for s in services:
        s.start()
    try:
        leader = wait_for(lambda: current_leader(wurk), timeout=5)
        wait_for(lambda: r.xlen(keys.STREAM) >= 4, timeout=10)
    finally:
        for s in services:
            s.stop()
    rows = History(wurk).recent(60)
    assert {row.leader for row in rows} == {leader}
    stamps = [int(row.id.split("-")[0]) for row in rows]
    assert all(b - a >= 150 for a, b in itertools.pairwise(stamps))


def test_a_worker_with_no_periodic_jobs_still_records(wurk: Wurk, r: Any) -> None:
    wurk.use(leadership.feature(2.0), history.feature(interval=0.2, retention=DAY))
    assert wurk.feature("periodic") is None
    launcher = Launcher(wurk)
    launcher.start()
    try:
        wait_for(lambda: r.xlen(keys.STREAM) >= 2, timeout=10)
        assert History(wurk).latest().leader == launcher.identity  # type: ignore[union-attr]
        assert History(wurk).latest().processes == 1  # type: ignore[union-attr]
    finally:
        launcher.stop()


def test_a_duty_that_fails_stops_neither_the_loops_nor_the_other_duties(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        name = "broken"

        def tick(self) -> None:
            raise RuntimeError("boom")

    seen: list[BaseException] = []
    wurk.error_handlers.append(lambda exc, ctx: seen.append(exc))
    wurk.use(
        leadership.feature(2.0),
        history.feature(interval=0.2, retention=DAY),
        Feature("broken", lambda engine: Plug(events=while_leading(engine, lambda e, identity: Broken()))),
    )
    service = Member(wurk, "host:1:a")
    with caplog.at_level(logging.ERROR, "django_wurk.routine"):
        service.start()
        try:
            wait_for(lambda: r.xlen(keys.STREAM) >= 2, timeout=10)
        finally:
            service.stop()
    assert "duty-broken pass failed" in caplog.text and any(str(e) == "boom" for e in seen)


def recorder_of(wurk: Wurk) -> Recorder:
    """The recorder a process of ``wurk`` would run when it leads."""
    member = Member(wurk, "host:1:x")
    member.process.leads = lambda: False  # it ticks nothing: only its duty is looked at
    wurk.events.fire("leader", member.process)
    try:
        recorder: Recorder = member.process.parts["duty-history"].duty
        return recorder
    finally:
        wurk.events.fire("leader_lost", member.process)


def test_using_again_replaces_and_drop_removes(wurk: Wurk) -> None:
    wurk.use(history.feature(30, DAY))
    wurk.use(history.feature(10, DAY))
    assert [f.name for f in wurk.features].count(history.DUTY) == 1
    assert recorder_of(wurk).interval == 10
    wurk.drop(history.DUTY)
    assert wurk.feature(history.DUTY) is None and wurk.events.listeners("leader") == []
    for bad in ({"interval": 0}, {"interval": float("nan")}, {"retention": 5, "interval": 30}):
        with pytest.raises(ValueError):
            history.feature(**bad)  # type: ignore[arg-type]


def test_deltas_span_gaps_and_read_none_after_a_reset() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = with_deltas([
        Snapshot("1-0", at, processed=10, failed=1),
        Snapshot("2-0", at, processed=25, failed=1),
        Snapshot("3-0", at, processed=3, failed=0),  # Stats.reset between them
        Snapshot("4-0", at, processed=None, failed=2),
        Snapshot("5-0", at, processed=9, failed=5),
    ])  # fmt: skip
    assert [(s.processed_delta, s.failed_delta) for s in rows] == [
        (None, None), (15, 0), (None, None), (None, 2), (None, 3),
    ]  # fmt: skip


def test_recent_reads_the_window_by_redis_s_clock_newest_kept(wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    for n, ago in enumerate((7_200_000, 1_800_000, 600_000, 1_000)):
        r.xadd(keys.STREAM, {"processed": str(n * 10)}, id=f"{now - ago}-0")
    assert [s.processed for s in History(wurk).recent(3600)] == [10, 20, 30]
    assert [s.processed_delta for s in History(wurk).recent(3600)] == [None, 10, 10]
    assert [s.processed for s in History(wurk).recent(3600, limit=2)] == [20, 30]
    with pytest.raises(ValueError):
        History(wurk).recent(0)


def test_sample_takes_the_newest_snapshot_of_each_slot_and_deltas_between_them(wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    # One snapshot a second for the last 100 seconds, processed counting up by 3.
    for n in range(100):
        r.xadd(keys.STREAM, {"processed": str(3 * n)}, id=f"{now - (99 - n) * 1000 - 500}-0")
    rows = History(wurk).sample(100, points=10)
    assert len(rows) == 10 and rows[-1].processed == 297  # the newest is always the last slot's
    assert all(b.at > a.at for a, b in itertools.pairwise(rows))
    assert sum(r_.processed_delta or 0 for r_ in rows) == rows[-1].processed - rows[0].processed  # type: ignore[operator]
    assert len(History(wurk).sample(100, points=1000)) == 100  # empty slots give nothing
    r.delete(keys.STREAM)
    r.set(keys.STREAM, "x")
    assert History(wurk).sample(3600) == []
    with pytest.raises(ValueError):
        History(wurk).sample(-1)


def test_the_settings_name_what_is_wrong() -> None:
    assert Settings().history_interval == 30 and Settings().history_retention == 7
    assert Settings.from_mapping({"HISTORY_RETENTION": "0"}).history_retention == 0
    for key, value in (
        ("HISTORY_INTERVAL", 0),
        ("HISTORY_INTERVAL", "nan"),
        ("HISTORY_INTERVAL", 100_000),
        ("HISTORY_RETENTION", -1),
        ("HISTORY_RETENTION", "inf"),
        ("HISTORY_RETENTION", 0.0001),  # less than one interval
    ):
        with pytest.raises(ConfigError, match=key):
            Settings.from_mapping({key: value})


def test_runwurk_s_glue_installs_the_duty_only_for_a_process_that_may_lead(wurk: Wurk) -> None:
    from django_wurk.periodic import install_history

    install_history(wurk, 5, 7, leader=True)
    assert recorder_of(wurk).interval == 5
    install_history(wurk, 5, 7, leader=False)
    assert wurk.feature(history.DUTY) is None
    install_history(wurk, 30, 7, leader=True)
    install_history(wurk, 30, 0, leader=True)
    assert wurk.feature(history.DUTY) is None


def test_stats_reset_is_not_a_negative_delta(wurk: Wurk, r: Any) -> None:
    lead(r, "host:1:a")
    r.set(core_keys.STAT_PROCESSED, 50)
    Recorder(wurk, "host:1:a", 0.01, DAY).record()
    Stats(wurk).reset()
    wait_for(lambda: Recorder(wurk, "host:1:a", 0.01, DAY).record(), timeout=2)
    rows = History(wurk).recent(60)
    assert [r_.processed for r_ in rows] == [50, 0] and rows[1].processed_delta is None


def test_runwurk_processes_with_no_periodic_jobs_record_once_per_interval(
    wurk: Wurk, r: Any, redis_url: str
) -> None:
    """Two real ``runwurk`` processes, no ``WURK["PERIODIC"]``: the leader of the two records, alone."""
    import signal
    import subprocess

    from tests.test_runwurk import start

    env = {"WURK_HISTORY_INTERVAL": "0.5", "WURK_LEADER_TTL": "3"}
    procs = [start(redis_url, "-c", "1", **env) for _ in range(2)]
    try:
        both = lambda: (s := History(wurk).latest()) is not None and s.processes == 2  # noqa: E731
        wait_for(lambda: r.xlen(keys.STREAM) >= 4 and both(), timeout=30)
        rows = History(wurk).recent(600)
        leaders = {row.leader for row in rows}
        assert len(leaders) == 1 and leaders <= {current_leader(wurk)}
        assert int(leaders.pop().split(":")[1]) in {p.pid for p in procs}
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
