"""Stats: the totals, the default queue's latency and the daily history, read as Sidekiq reads them.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import Queue, Stats
from django_wurk.core import wire
from tests.sidekiq_data import info_for, lpush, payload, write_process, zadd


def test_stats_of_an_empty_database(wurk: Wurk, r: Any) -> None:
    s = Stats(wurk)
    assert (s.processed, s.failed, s.enqueued, s.expired) == (0, 0, 0, 0)
    assert (s.scheduled_size, s.retry_size, s.dead_size) == (0, 0, 0)
    assert (s.processes_size, s.workers_size) == (0, 0)
    assert s.default_queue_latency == 0.0
    assert s.queues == {}


def test_stats_reads_every_field(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed", 9)
    r.set("stat:failed", 5)
    zadd(r, "schedule", payload(1), 1.0)
    for n in range(2):
        zadd(r, "retry", payload(10 + n), 2.0 + n)
    for n in range(3):
        zadd(r, "dead", payload(20 + n), 3.0 + n)
    write_process(r, "h:1:aaaaaaaaaaaa", info_for("h:1:aaaaaaaaaaaa"), busy=2)
    write_process(r, "h:2:bbbbbbbbbbbb", info_for("h:2:bbbbbbbbbbbb"), busy=3)
    r.sadd("processes", "h:3:cccccccccccc")  # listed, but its hash has expired
    lpush(r, "a", payload(30), payload(31))
    lpush(r, "b", payload(32), payload(33), payload(34))
    lpush(r, "default", payload(35, enqueued_at=time.time()))
    r.sadd("queues", "empty")  # emptied lists stay in `queues`
    r.lpush("queue:orphan", wire.dumps(payload(36)))  # not in `queues`: Sidekiq does not count it

    s = Stats(wurk)
    assert (s.processed, s.failed) == (9, 5)
    assert (s.scheduled_size, s.retry_size, s.dead_size) == (1, 2, 3)
    assert s.processes_size == 3  # SCARD, stale member included, as Sidekiq reports it
    assert s.workers_size == 5  # sum of the hashes' `busy`
    assert s.queues == {"a": 2, "b": 3, "default": 1, "empty": 0}
    assert list(s.queues) == sorted(s.queues)
    assert s.enqueued == 6
    assert 0.0 <= s.default_queue_latency < 5.0


@pytest.mark.parametrize("style", ["float", "ms", "created_at only"])
def test_default_queue_latency_reads_the_oldest_job(wurk: Wurk, r: Any, style: str) -> None:
    now = time.time()
    old: dict[str, Any]
    if style == "float":
        old = payload(1, enqueued_at=now - 30.0)
    elif style == "ms":
        old = payload(1, enqueued_at=int((now - 30.0) * 1000))  # Sidekiq 8 writes int ms
    else:
        old = payload(1, created_at=now - 30.0)
    lpush(r, "default", old)
    lpush(r, "default", payload(2, enqueued_at=now))  # newer, at the head
    latency = Stats(wurk).default_queue_latency
    assert 29.0 < latency < 40.0
    assert Queue("default", wurk).latency() == pytest.approx(latency, abs=2.0)


def test_default_queue_latency_is_zero_for_an_unreadable_or_future_job(wurk: Wurk, r: Any) -> None:
    lpush(r, "default", b"not json")
    assert Stats(wurk).default_queue_latency == 0.0
    r.delete("queue:default")
    lpush(r, "default", payload(1, enqueued_at=time.time() + 100.0))  # clock skew: never negative
    assert Stats(wurk).default_queue_latency == 0.0


def test_history_reads_daily_keys_newest_first(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed:2026-11-29", 9)
    r.set("stat:failed:2026-11-29", 5)
    r.set("stat:processed:2026-11-27", 4)
    r.set("stat:processed:2026-11-26", 100)  # outside the window
    h = Stats.history(days=3, start=date(2026, 11, 29), wurk=wurk)
    assert h == {
        "processed": {"2026-11-29": 9, "2026-11-28": 0, "2026-11-27": 4},
        "failed": {"2026-11-29": 5, "2026-11-28": 0, "2026-11-27": 0},
    }
    assert list(h["processed"]) == ["2026-11-29", "2026-11-28", "2026-11-27"]
    # Month and year boundaries are plain calendar arithmetic.
    r.set("stat:failed:2025-12-31", 7)
    assert Stats.history(days=2, start=date(2026, 1, 1), wurk=wurk)["failed"] == {
        "2026-01-01": 0,
        "2025-12-31": 7,
    }


def test_history_defaults_to_today_in_utc(wurk: Wurk, r: Any) -> None:
    today = datetime.now(UTC).date()
    r.set(f"stat:processed:{today.isoformat()}", 3)
    r.set(f"stat:failed:{(today - timedelta(days=1)).isoformat()}", 2)
    h = Stats.history(2, wurk=wurk)
    assert h["processed"][today.isoformat()] == 3
    assert h["failed"][(today - timedelta(days=1)).isoformat()] == 2
    assert len(Stats.history(wurk=wurk)["processed"]) == 30


@pytest.mark.parametrize("days", [0, -1, 181])
def test_history_refuses_days_outside_the_ui_range(wurk: Wurk, days: int) -> None:
    with pytest.raises(ValueError, match="days"):
        Stats.history(days, wurk=wurk)
    assert len(Stats.history(180, wurk=wurk)["failed"]) == 180


def test_reset_zeroes_the_totals_only(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed", 9)
    r.set("stat:failed", 5)
    r.set("stat:expired", 2)
    r.set("stat:processed:2026-11-29", 9)
    s = Stats(wurk)
    assert s.expired == 2
    s.reset()
    assert r.get("stat:processed") == b"0" and r.get("stat:failed") == b"0" and r.get("stat:expired") == b"0"
    assert r.get("stat:processed:2026-11-29") == b"9"
    fresh = Stats(wurk)
    assert (fresh.processed, fresh.failed, fresh.expired) == (0, 0, 0)
