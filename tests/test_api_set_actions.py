"""Changing the sorted sets one entry at a time and whole: retry, kill, add to queue, trim, clear.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from django_wurk import Config, TimestampStyle, Wurk
from django_wurk.api import DeadSet, RetrySet, ScheduledSet
from django_wurk.core import wire
from django_wurk.core.api import KilledByAPI
from django_wurk.core.worker.retry import RetryHandler
from tests.sidekiq_data import (
    RETRY_SCORE,
    SCHEDULED_SCORE,
    UNREADABLE,
    bounded,
    payload,
    queue_payloads,
    zadd,
)
from tests.vectors import raw


def test_delete_by_key_and_by_entry(wurk: Wurk, r: Any) -> None:
    zadd(r, "dead", payload(1), 10.0)
    kept = zadd(r, "dead", payload(2), 10.0)
    dead = DeadSet(wurk)
    assert dead.delete(f"10.0-{1:024x}") is True
    assert dead.delete(f"10.0-{1:024x}") is False
    [entry] = dead.fetch(10.0)
    assert entry.raw == kept
    assert entry.delete() is True and entry.delete() is False
    assert dead.size() == 0


def test_unreadable_sorted_entries_are_listed_and_deletable(wurk: Wurk, r: Any) -> None:
    for i, data in enumerate(UNREADABLE):
        zadd(r, "retry", data, float(i))
    rs = RetrySet(wurk)
    entries = list(rs)
    assert [e.raw for e in entries] == UNREADABLE
    assert all(e.payload is None and e.job_class == "(unreadable payload)" for e in entries)
    # No jid: a digest of the exact bytes stands in for it, so each key finds its own entry.
    assert all(re.fullmatch(rf"{float(i)!r}-raw:[0-9a-f]{{32}}", e.key) for i, e in enumerate(entries))
    assert all(rs.find(e.key).raw == e.raw for e in entries)  # type: ignore[union-attr]
    assert list(rs.scan("not json")) and rs.find_job("x") is None
    assert all(e.delete() for e in entries)
    assert rs.size() == 0


def test_add_to_queue_pushes_onto_the_payloads_queue(wurk: Wurk, r: Any) -> None:
    data = raw("scheduled_job.json")
    r.zadd("schedule", {data: SCHEDULED_SCORE})
    zadd(r, "schedule", payload(9, queue="critical"), SCHEDULED_SCORE + 1)
    ss = ScheduledSet(wurk)
    first, second = list(ss)
    before = time.time()
    assert first.add_to_queue() is True
    assert second.add_to_queue() is True
    assert r.smembers("queues") == {b"default", b"critical"}
    [pushed] = queue_payloads(r, "default")
    original = json.loads(data)
    # Unchanged apart from a fresh enqueued_at (a float, Sidekiq 6/7 style).
    assert {k: v for k, v in pushed.items() if k != "enqueued_at"} == original
    assert isinstance(pushed["enqueued_at"], float) and before <= pushed["enqueued_at"] <= time.time()
    assert "at" not in pushed
    assert [p["jid"] for p in queue_payloads(r, "critical")] == [f"{9:024x}"]
    assert ss.size() == 0
    # A second click finds it gone and pushes nothing.
    assert first.add_to_queue() is False
    assert r.llen("queue:default") == 1


def test_add_to_queue_writes_millisecond_stamps_when_configured(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(timestamps=TimestampStyle.INT_MILLISECONDS))
    zadd(wurk.redis, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.add_to_queue() is True
    [pushed] = queue_payloads(wurk.redis)
    assert isinstance(pushed["enqueued_at"], int)
    assert abs(pushed["enqueued_at"] / 1000 - time.time()) < 5


def test_add_to_queue_goes_through_client_middleware(wurk: Wurk, r: Any) -> None:
    class Stamp:
        def __call__(self, job_class: str, p: dict[str, Any], queue: str, call_next: Any) -> Any:
            p["stamped"] = job_class
            return call_next()

    wurk.client_middleware.add(Stamp)
    zadd(r, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.add_to_queue() is True
    [pushed] = queue_payloads(r)
    assert pushed["stamped"] == "EchoJob" and pushed["jid"] == f"{1:024x}"


def test_retry_lowers_retry_count_and_requeues(wurk: Wurk, r: Any) -> None:
    data = raw("retry_job.json")
    r.zadd("retry", {data: RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    before = time.time()
    assert entry.retry() is True
    assert r.zcard("retry") == 0
    assert r.smembers("queues") == {b"default"}
    [stored] = r.lrange("queue:default", 0, -1)
    pushed = json.loads(stored)
    original = json.loads(data)
    assert pushed["retry_count"] == original["retry_count"] - 1 == -1
    assert before <= pushed["enqueued_at"] <= time.time()
    unchanged = {k for k in original if k not in ("retry_count", "enqueued_at")}
    assert {k: pushed[k] for k in unchanged} == {k: original[k] for k in unchanged}
    assert list(pushed) == list(original)  # no key added, order kept
    assert entry.retry() is False  # it has gone
    assert r.llen("queue:default") == 1


def test_manual_retry_then_failure_matches_sidekiq(wurk: Wurk, r: Any) -> None:
    """retry_job.json -> "Retry Now" -> fails again == retry_job_after_manual_retry.json (README)."""

    class AcceptanceError(Exception):
        pass

    r.zadd("retry", {raw("retry_job.json"): RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    assert entry.retry() is True
    fetched = r.rpop("queue:default")
    outcome = RetryHandler(wurk).handle(
        fetched, "default", None, AcceptanceError('FailJob failed on purpose with args=["A"]')
    )
    assert outcome == "retry"
    [(stored, _)] = r.zrange("retry", 0, -1, withscores=True)
    ours = json.loads(stored)
    ruby = json.loads(raw("retry_job_after_manual_retry.json"))
    assert list(ours) == list(ruby)  # same keys, same order
    stamps = ("enqueued_at", "retried_at")
    assert {k: v for k, v in ours.items() if k not in stamps} == {
        k: v for k, v in ruby.items() if k not in stamps
    }
    assert ours["retry_count"] == 0 and ours["failed_at"] == ruby["failed_at"]
    assert ours["retried_at"] >= ours["enqueued_at"]


def test_retry_keeps_a_missing_retry_count_missing(wurk: Wurk, r: Any) -> None:
    zadd(r, "dead", payload(1), 5.0)
    [entry] = list(DeadSet(wurk))
    assert entry.retry() is True
    [pushed] = queue_payloads(r)
    assert "retry_count" not in pushed and r.zcard("dead") == 0


def test_retry_of_a_vanished_entry_pushes_nothing(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "retry", payload(1, queue="somewhere", retry_count=3), 5.0)
    [entry] = list(RetrySet(wurk))
    r.zrem("retry", member)  # another tab (or the poller) got there first
    assert entry.retry() is False
    assert r.exists("queue:somewhere") == 0
    assert r.smembers("queues") == set()
    assert entry.add_to_queue() is False and r.exists("queue:somewhere") == 0


def test_retry_and_add_to_queue_leave_unreadable_entries(wurk: Wurk, r: Any) -> None:
    for i, data in enumerate(UNREADABLE):
        zadd(r, "retry", data, float(i))
        zadd(r, "schedule", data, float(i))
    for entry in RetrySet(wurk):
        assert entry.retry() is False
    for entry in ScheduledSet(wurk):
        assert entry.add_to_queue() is False
    assert r.zcard("retry") == r.zcard("schedule") == len(UNREADABLE)
    assert r.smembers("queues") == set()


def _record_deaths(wurk: Wurk) -> list[tuple[dict[str, Any], BaseException]]:
    deaths: list[tuple[dict[str, Any], BaseException]] = []
    wurk.death_handlers.append(lambda p, exc: deaths.append((p, exc)))
    return deaths


def test_kill_moves_the_entry_to_dead_unchanged(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    data = raw("retry_job.json")
    r.zadd("retry", {data: RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    before = time.time()
    assert entry.kill() is True
    assert r.zcard("retry") == 0
    [(member, score)] = r.zrange("dead", 0, -1, withscores=True)
    assert member == data  # byte for byte, as Sidekiq's kill leaves it
    assert before <= score <= time.time()
    [(p, exc)] = deaths
    assert p == json.loads(data)
    # Sidekiq's RuntimeError and message; its own subclass, so a handler can tell a kill by hand.
    assert isinstance(exc, RuntimeError) and type(exc) is KilledByAPI and str(exc) == "Job killed by API"
    # Gone now: a second kill does nothing and tells no one.
    assert entry.kill() is False
    assert len(deaths) == 1 and r.zcard("dead") == 1


def test_kill_from_the_schedule_and_of_a_dead_entry(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.kill() is True
    [dead] = list(DeadSet(wurk))
    assert dead.kill() is False  # already dead
    assert DeadSet(wurk).size() == 1 and len(deaths) == 1


def test_kill_of_an_unreadable_entry_moves_it_without_death_handlers(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "retry", b"not json at all", 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    assert r.zrange("dead", 0, -1) == [b"not json at all"]
    assert deaths == []


def test_kill_keeps_invalid_utf8_bytes(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", b"\xff\xfe{not utf-8", 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    assert r.zrange("dead", 0, -1) == [b"\xff\xfe{not utf-8"]


def test_dead_set_is_trimmed_by_count(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(dead_max_jobs=3))
    r = wurk.redis
    now = time.time()
    for n in range(5):
        zadd(r, "dead", payload(n), now - 50 + n)
    zadd(r, "retry", payload(99), 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    # ZREMRANGEBYRANK dead 0 -3: as in Sidekiq, dead_max_jobs - 1 entries survive, newest first.
    assert [e.args[0] for e in DeadSet(wurk).page(newest_first=True)[1]] == [99, 4]


def test_dead_set_is_trimmed_by_age(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(dead_timeout=100))
    r = wurk.redis
    now = time.time()
    zadd(r, "dead", payload(1), now - 1000)  # older than dead_timeout
    zadd(r, "dead", payload(2), now - 50)
    DeadSet(wurk).kill(payload(3), notify=False)
    assert sorted(e.args[0] for e in DeadSet(wurk)) == [2, 3]


def test_dead_set_kill_adds_a_payload_and_notifies(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    before = time.time()
    DeadSet(wurk).kill(payload(1))
    DeadSet(wurk).kill(wire.dumps(payload(2)), notify=False)
    entries = list(DeadSet(wurk))
    assert [e.raw for e in entries] == [wire.dumps(payload(1)).encode(), wire.dumps(payload(2)).encode()]
    assert all(before <= e.score <= time.time() for e in entries)
    [(p, exc)] = deaths
    assert p == payload(1) and str(exc) == "Job killed by API"


def test_retry_all_skips_unreadable_entries_and_terminates(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", b"not json at all", 0.5)  # rank 0: the drain must step over it
    for n in range(150):
        zadd(r, "retry", payload(n, retry_count=2), 1.0 + n)
    zadd(r, "retry", b"\xff{", 75.5)  # and over one in the middle
    assert bounded(RetrySet(wurk).retry_all) == 150
    assert r.zrange("retry", 0, -1) == [b"not json at all", b"\xff{"]
    pushed = queue_payloads(r)
    assert len(pushed) == 150 and {p["retry_count"] for p in pushed} == {1}
    # Oldest first, so the queue runs them in their original order.
    assert [p["args"][0] for p in reversed(pushed)] == list(range(150))


def test_kill_all_moves_everything_including_unreadable(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "retry", b"not json at all", 0.5)
    for n in range(120):
        zadd(r, "retry", payload(n), 1.0 + n)
    assert bounded(RetrySet(wurk).kill_all) == 121
    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 121
    assert b"not json at all" in r.zrange("dead", 0, -1)
    assert len(deaths) == 120


def test_kill_all_on_the_dead_set_does_nothing(wurk: Wurk, r: Any) -> None:
    for n in range(3):
        zadd(r, "dead", payload(n), float(n))
    assert bounded(DeadSet(wurk).kill_all) == 0
    assert r.zcard("dead") == 3


def test_add_all_to_queue_moves_every_readable_entry(wurk: Wurk, r: Any) -> None:
    for n in range(130):
        zadd(r, "schedule", payload(n, queue="low" if n % 2 else "high"), 1000.0 + n)
    zadd(r, "schedule", b'{"class":"NoArgs"}', 999.0)
    assert bounded(ScheduledSet(wurk).add_all_to_queue) == 130
    assert r.zrange("schedule", 0, -1) == [b'{"class":"NoArgs"}']
    assert r.llen("queue:low") == r.llen("queue:high") == 65
    assert r.smembers("queues") == {b"low", b"high"}
    assert all("enqueued_at" in p for p in queue_payloads(r, "low"))


def test_drain_of_an_empty_set_is_zero(wurk: Wurk) -> None:
    assert RetrySet(wurk).retry_all() == 0
    assert RetrySet(wurk).kill_all() == 0
    assert ScheduledSet(wurk).add_all_to_queue() == 0


def test_reschedule_moves_an_entry_in_time(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "schedule", payload(1), 100.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.reschedule(200.5) is True
    assert r.zscore("schedule", member) == 200.5
    assert entry.reschedule(200.5) is True  # still there, just not moved
    r.zrem("schedule", member)
    assert entry.reschedule(300.0) is False  # gone: not re-added
    assert r.zcard("schedule") == 0


def test_clear_empties_only_that_set(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", payload(1), 1.0)
    zadd(r, "dead", payload(2), 1.0)
    RetrySet(wurk).clear()
    assert r.exists("retry") == 0 and r.zcard("dead") == 1
    DeadSet(wurk).clear()
    ScheduledSet(wurk).clear()
    assert r.dbsize() == 0
