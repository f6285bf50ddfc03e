"""Rate limiters: each kind's decisions, waits, boundaries, keys and TTLs, on a real server.

Boundaries are reached by giving the script an explicit "now" (``attempt(now=...)``), the
test-only path through the same Lua step the server's clock drives; waits are real.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from django_wurk import Wurk, limiter
from django_wurk.core.features.limiters import names
from django_wurk.core.features.limiters.base import LimiterStateError
from django_wurk.core.features.limiters.concurrent import Concurrent

T = 1_800_000_000.0  # a whole number of days since the epoch: every interval starts here


# Concurrent -----------------------------------------------------------------------------


def test_concurrent_admits_limit_holders_and_a_release_frees_a_slot(wurk: Wurk, r: Any) -> None:
    lim = limiter.concurrent("erp", 2, wait_timeout=0)
    assert isinstance(lim, Concurrent)
    assert lim.acquire("a").admitted and lim.acquire("b").admitted
    refused = lim.acquire("c")
    assert not refused.admitted and refused.wait is not None and 29 < refused.wait <= 30
    with pytest.raises(limiter.OverLimit) as caught, lim.within_limit():
        pytest.fail("ran over the limit")
    assert caught.value.limiter is lim
    assert lim.release("a")
    assert not lim.release("a")  # released once
    with lim.within_limit():
        assert r.zcard("lmtr-cs:erp") == 2
    assert r.zcard("lmtr-cs:erp") == 1
    stats = r.hgetall("lmtr-stats:erp")
    assert stats[b"held"] == b"3" and stats[b"immediate"] == b"3" and stats[b"overages"] == b"1"


def test_concurrent_waits_for_a_slot_up_to_wait_timeout(wurk: Wurk) -> None:
    holder = limiter.concurrent("mutex", 1, wait_timeout=0)
    waiter = limiter.concurrent("mutex", 1, wait_timeout=5)
    assert holder.acquire("first").admitted
    threading.Timer(0.4, holder.release, ("first",)).start()
    started = time.monotonic()
    with waiter.within_limit():
        waited = time.monotonic() - started
    assert 0.35 < waited < 2.0
    assert holder.acquire("x").admitted
    impatient = limiter.concurrent("mutex", 1, wait_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(limiter.OverLimit), impatient.within_limit():
        pass
    assert 0.25 < time.monotonic() - started < 1.0


def test_concurrent_reclaims_a_slot_after_lock_timeout_not_before(wurk: Wurk, r: Any) -> None:
    lim = limiter.concurrent("reclaim", 1, lock_timeout=10)
    assert lim.acquire("dead-holder", now=T).admitted
    assert not lim.acquire("other", now=T + 9.99).admitted
    assert lim.acquire("other", now=T + 10.01).admitted
    assert r.zrange("lmtr-cs:reclaim", 0, -1) == [b"other"]
    assert r.hget("lmtr-stats:reclaim", "reclaimed") == b"1"


def test_status_reads_never_trim(wurk: Wurk, r: Any) -> None:
    lim = limiter.concurrent("status", 3, lock_timeout=10)
    lim.acquire("old", now=T)
    lim.acquire("new", now=T + 5)
    status = lim.status(now=T + 12)
    assert status.used == 1 and status.limit == 3 and status.reset_at == pytest.approx(T + 15)
    assert status.available
    assert r.zcard("lmtr-cs:status") == 2  # the expired holder is still there


# Bucket ---------------------------------------------------------------------------------


def test_bucket_counts_per_calendar_period_and_resets_at_the_boundary(wurk: Wurk, r: Any) -> None:
    lim = limiter.bucket("api", 3, "minute")
    last_moment = T + 59.999
    for _ in range(3):
        assert lim.attempt(now=last_moment).admitted
    refused = lim.attempt(now=last_moment)
    assert not refused.admitted and refused.wait == pytest.approx(0.001, abs=1e-5)
    status = lim.status(now=last_moment)
    assert (status.used, status.limit, status.reset_at) == (3, 3, T + 60)
    assert lim.status(now=T + 60).used == 0
    for _ in range(3):
        assert lim.attempt(now=T + 60).admitted
    assert not lim.attempt(now=T + 60.5).admitted
    assert 0 < r.ttl("lmtr-b:api") <= 120  # two intervals


def test_bucket_waits_for_the_next_second(wurk: Wurk) -> None:
    lim = limiter.bucket("per-second", 1, "second", wait_timeout=2)
    with lim.within_limit():
        pass
    started = time.monotonic()
    with lim.within_limit():
        pass
    assert time.monotonic() - started < 1.5  # at most to the next second (and round trips)
    day = limiter.bucket("per-day", 1, "day", wait_timeout=1)
    with day.within_limit():
        pass
    started = time.monotonic()
    with pytest.raises(limiter.OverLimit), day.within_limit():
        pass
    assert time.monotonic() - started < 0.5  # the next day is too far: no wait at all


# Window ---------------------------------------------------------------------------------


def test_window_slides(wurk: Wurk, r: Any) -> None:
    lim = limiter.window("slide", 2, 10)
    assert lim.attempt(now=T + 100).admitted
    assert lim.attempt(now=T + 105).admitted
    refused = lim.attempt(now=T + 109.9)
    assert not refused.admitted and refused.wait == pytest.approx(0.1, abs=1e-5)
    status = lim.status(now=T + 109.9)
    assert (status.used, status.reset_at) == (2, pytest.approx(T + 110))
    assert lim.attempt(now=T + 110).admitted  # the call at 100 left the window at 110
    assert not lim.attempt(now=T + 114.9).admitted
    assert lim.attempt(now=T + 115).admitted
    assert limiter.window("named", 1, "hour").seconds == 3600


# Leaky ----------------------------------------------------------------------------------


def test_leaky_takes_a_burst_then_drains_steadily(wurk: Wurk) -> None:
    lim = limiter.leaky("drip", 3, 3)  # one drop a second
    for _ in range(3):
        assert lim.attempt(now=T).admitted
    refused = lim.attempt(now=T)
    assert not refused.admitted and refused.wait == pytest.approx(1.0)
    assert lim.status(now=T).used == 3
    assert lim.attempt(now=T + 1).admitted
    refused = lim.attempt(now=T + 1.5)
    assert not refused.admitted and refused.wait == pytest.approx(0.5)
    status = lim.status(now=T + 2)
    assert status.used == pytest.approx(2) and status.reset_at == pytest.approx(T + 4)
    assert lim.status(now=T + 100).used == 0
    assert limiter.leaky("per-minute", 60, "minute").drain == 60


# Points ---------------------------------------------------------------------------------


def test_points_spend_refill_and_settle(wurk: Wurk) -> None:
    lim = limiter.points("graphql", 10, 2)
    assert lim.attempt(now=T, estimate=6).admitted
    assert not lim.attempt(now=T, estimate=6).admitted  # 4 left
    assert lim.attempt(now=T + 1, estimate=6).admitted  # 4 + 2 refilled
    lim.settle(-5, now=T + 1)  # it cost 1, not 6
    assert lim.status(now=T + 1).used == pytest.approx(5)
    lim.settle(20, now=T + 1)  # it cost 20 more: in debt
    assert lim.status(now=T + 1).used == pytest.approx(25)
    assert not lim.attempt(now=T + 1, estimate=1).admitted
    assert lim.attempt(now=T + 13, estimate=1).admitted
    assert not lim.attempt(now=T + 100, estimate=11).admitted  # more than it ever holds


def test_points_never_wait_and_settle_what_the_block_reports(wurk: Wurk) -> None:
    lim = limiter.points("tokens", 100, 0.001)
    with lim.within_limit(estimate=80) as handle:
        handle.points_used(30)
    assert lim.status().used == pytest.approx(30, abs=0.1)
    started = time.monotonic()
    with pytest.raises(limiter.OverLimit), lim.within_limit(estimate=80):
        pass
    assert time.monotonic() - started < 0.5
    with pytest.raises(TypeError), limiter.window("w", 5, 10).within_limit() as handle:
        handle.points_used(1)


# Unlimited, names, options ---------------------------------------------------------------


def test_unlimited_always_passes_and_writes_nothing(wurk: Wurk, r: Any) -> None:
    lim = limiter.unlimited()
    for _ in range(100):
        with lim.within_limit():
            pass
    assert r.dbsize() == 0
    assert lim.status().limit is None and lim.status().available


@pytest.mark.parametrize(
    "build",
    [
        lambda: limiter.concurrent("bad name", 1),
        lambda: limiter.concurrent("x" * 201, 1),
        lambda: limiter.concurrent("n", 0),
        lambda: limiter.concurrent("n", 1, lock_timeout=0),
        lambda: limiter.concurrent("n", 1, wait_timeout=-1),
        lambda: limiter.bucket("n", 5, "fortnight"),
        lambda: limiter.bucket("n", 5, 60),
        lambda: limiter.window("n", 5, float("nan")),
        lambda: limiter.leaky("n", 1.5, 10),
        lambda: limiter.points("n", 0, 1),
        lambda: limiter.concurrent("n", 1, reschedule=-1),
        lambda: limiter.concurrent("n", 1, backoff=5),
    ],
)
def test_bad_options_fail_where_the_limiter_is_built(build: Any) -> None:
    with pytest.raises(limiter.LimiterError):
        build()


def test_building_a_limiter_touches_no_redis_and_first_use_registers_it(wurk: Wurk, r: Any) -> None:
    lim = limiter.concurrent("tenant:42", 5, ttl=100)  # below the floor: a day
    assert r.dbsize() == 0
    with lim.within_limit():
        pass
    meta = r.hgetall("lmtr:tenant:42")
    assert meta[b"type"] == b"concurrent" and b'"limit":5' in meta[b"options"]
    assert len(meta[b"fingerprint"]) == 64
    assert r.smembers("lmtr-list") == {b"tenant:42"}
    assert 86_000 < r.ttl("lmtr:tenant:42") <= 86_400
    assert 89 * 86_400 < (limiter.bucket("default-ttl", 1, "day").ttl) <= 90 * 86_400


def test_expired_names_are_swept_from_the_list(wurk: Wurk, r: Any) -> None:
    for i in range(5):
        limiter.window(f"user-{i}", 1, 10).attempt()
    r.delete("lmtr:user-1", "lmtr:user-3")  # as if their TTL ran out
    cursor, removed = names.sweep(wurk)
    assert (cursor, removed) == (0, 2)
    assert r.smembers("lmtr-list") == {b"user-0", b"user-2", b"user-4"}
    # A registration that creates a description sweeps a chunk on its own.
    r.delete("lmtr:user-0")
    names._cursor = 0
    limiter.window("user-5", 1, 10).attempt()
    assert b"user-0" not in r.smembers("lmtr-list")


# Hostile data ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: limiter.concurrent("h", 1), "lmtr-cs:h"),
        (lambda: limiter.bucket("h", 1, "hour"), "lmtr-b:h"),
        (lambda: limiter.window("h", 1, 60), "lmtr-w:h"),
        (lambda: limiter.leaky("h", 1, 60), "lmtr-l:h"),
        (lambda: limiter.points("h", 1, 1), "lmtr-p:h"),
    ],
)
def test_a_state_key_of_the_wrong_type_is_reported_then_started_afresh(
    wurk: Wurk, r: Any, build: Any, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    r.rpush(key, b"\xff garbage")
    r.set("lmtr:h", b"\x00not a hash")
    r.set("lmtr-list", "nor a set")
    lim = build()
    with pytest.raises(LimiterStateError, match="holds a list"):
        lim.status()
    with lim.within_limit():
        pass
    assert "started afresh" in caplog.text
    assert r.type(key) != b"list" and r.type("lmtr:h") == b"hash"
    assert r.smembers("lmtr-list") == {b"h"}
    assert lim.status().used == pytest.approx(0 if key == "lmtr-cs:h" else 1, abs=0.01)  # a slot was released


def test_garbage_numbers_in_a_state_hash_read_as_absent(wurk: Wurk, r: Any) -> None:
    r.hset("lmtr-l:g", mapping={"level": "nan", "last": "yesterday"})
    r.hset("lmtr-p:g", mapping={"points": "inf", "last": b"\xff"})
    r.hset("lmtr-b:g", mapping={"period": "1e999", "count": "-"})
    assert limiter.leaky("g", 1, 60).attempt().admitted
    assert limiter.points("g", 5, 1).attempt(estimate=5).admitted
    assert not limiter.points("g", 5, 0.0001).attempt(estimate=5).admitted
    assert limiter.bucket("g", 1, "hour").attempt().admitted
