"""Expiring jobs: ``expires_in`` becomes ``expires_at`` at push, and a worker skips a job past it.

The pushes are read back from Redis as stored; the skips are done by real workers (the
``workers`` fixture) on jobs that record every run in Redis, so "never ran" is checked, not
assumed. Payloads written by hand stand for what Ruby Sidekiq Pro (or garbage) leaves.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Job, Wurk, job, testing, wurk
from django_wurk.api import RetrySet, Stats
from django_wurk.core import keys, wire
from django_wurk.core.features.expiring import EXPIRES_AT, EXPIRES_IN
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp.batch_jobs import Recorder, runs

#: Hash: marker (each job's first argument) -> how many times that job ran.
RUNS = "expiring:runs"


def ran(r: Any, marker: str) -> int:
    return int(r.hget(RUNS, marker) or 0)


@job(expires_in=60)
def refresh(marker: str) -> None:
    """Stands for a cache refresh: pointless once a minute has passed."""
    wurk.redis.hincrby(RUNS, marker, 1)


@job
def plain(marker: str) -> None:
    wurk.redis.hincrby(RUNS, marker, 1)


class Digest(Job):
    options = {"expires_in": timedelta(hours=1)}

    def perform(self, marker: str) -> None:
        wurk.redis.hincrby(RUNS, marker, 1)


class Hourly(Job):
    expires_in = 3600  # a feature's option as a class attribute, like ``queue``

    def perform(self, marker: str) -> None:
        wurk.redis.hincrby(RUNS, marker, 1)


class FailsOnce(Job):
    """Fails its first run; its retry waits an hour, unless a test makes it due."""

    retry = 5

    def retry_in(self, count: int, exc: BaseException) -> int:
        return 3600

    def perform(self, marker: str) -> None:
        if wurk.redis.hincrby(RUNS, marker, 1) == 1:
            raise RuntimeError("first run fails")


def stored(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(keys.queue(queue), 0, -1)]


def scheduled(r: Any) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(m), s) for m, s in r.zrange(keys.SCHEDULE, 0, -1, withscores=True)]


def hand_written(marker: str, expires_at: Any, **extra: Any) -> dict[str, Any]:
    """A ``plain`` job as another producer (Ruby Sidekiq Pro, or garbage) leaves it in a queue;
    its jid is the marker, its one argument."""
    now = time.time()
    body = {"retry": True, "queue": "default", "class": plain.wire_name, "args": [marker], "jid": marker,
            "created_at": now, "enqueued_at": now, EXPIRES_AT: expires_at, **extra}  # fmt: skip
    if expires_at is KEEP_OUT:
        del body[EXPIRES_AT]
    return body


KEEP_OUT: Any = object()


def push_raw(r: Any, *payloads: dict[str, Any]) -> None:
    r.sadd(keys.QUEUES, "default")
    r.lpush(keys.queue("default"), *[wire.dumps(p) for p in payloads])


def idle(r: Any) -> bool:
    """Nothing queued or fetched-and-unacknowledged: every job's outcome is written."""
    fetched = any(r.llen(k) for k in r.scan_iter(match="queue:sq|*"))
    return not fetched and r.llen(keys.queue("default")) == 0


# At push: expires_at from expires_in ------------------------------------------------------------


def test_perform_async_stamps_expires_at_from_the_push(wurk: Wurk, r: Any) -> None:
    before = time.time()
    refresh.perform_async("k")
    after = time.time()
    (payload,) = stored(r)
    assert payload[EXPIRES_IN] == 60 and isinstance(payload[EXPIRES_IN], int)
    assert isinstance(payload[EXPIRES_AT], float)
    assert before + 60 <= payload[EXPIRES_AT] <= after + 60
    assert "at" not in payload


def test_a_scheduled_job_expires_counting_from_its_scheduled_time(wurk: Wurk, r: Any) -> None:
    refresh.perform_in(7200, "k")
    when = datetime.now(UTC) + timedelta(hours=3)
    refresh.perform_at(when, "k")
    (first, first_at), (second, _) = scheduled(r)
    # Sidekiq Pro's example: scheduled two hours ahead, expiring an hour after that.
    assert first[EXPIRES_AT] == pytest.approx(first_at + 60, abs=1e-6)
    assert first_at == pytest.approx(time.time() + 7200, abs=5)
    assert second[EXPIRES_AT] == pytest.approx(when.timestamp() + 60, abs=1e-6)
    assert "at" not in first and "at" not in second  # the score holds it, as Sidekiq stores it


def test_perform_bulk_stamps_every_job(wurk: Wurk, r: Any) -> None:
    now = time.time()
    refresh.perform_bulk([["a"], ["b"], ["c"]])
    payloads = stored(r)
    assert len(payloads) == 3
    assert all(now + 59 < p[EXPIRES_AT] < now + 61 for p in payloads)


def test_set_takes_a_timedelta_and_class_options_work(wurk: Wurk, r: Any) -> None:
    now = time.time()
    plain.set(expires_in=timedelta(minutes=5)).perform_async("a")
    Digest.perform_async("b")
    refresh.set(expires_in=1.5).perform_async("x")
    Hourly.perform_async("h")
    a, b, c, d = reversed(stored(r))  # LPUSH: newest first
    assert (a[EXPIRES_IN], b[EXPIRES_IN], c[EXPIRES_IN], d[EXPIRES_IN]) == (300, 3600, 1.5, 3600)
    assert a[EXPIRES_AT] == pytest.approx(now + 300, abs=5)
    assert b[EXPIRES_AT] == pytest.approx(now + 3600, abs=5)
    assert c[EXPIRES_AT] == pytest.approx(now + 1.5, abs=5)


def test_expires_in_none_turns_a_class_default_off(wurk: Wurk, r: Any) -> None:
    refresh.set(expires_in=None).perform_async("k")
    (payload,) = stored(r)
    assert EXPIRES_AT not in payload


def test_a_given_expires_at_is_kept(wurk: Wurk, r: Any) -> None:
    """Stamped once: a retry, a promotion or a Ruby push that already has one keeps it."""
    payload = {"class": "Ruby::Job", "args": [], "queue": "default", EXPIRES_IN: 60, EXPIRES_AT: 1234.5}
    wurk.client.push(payload)
    assert stored(r)[0][EXPIRES_AT] == 1234.5


def test_a_job_without_expires_in_gets_no_deadline(wurk: Wurk, r: Any) -> None:
    plain.perform_async("p")
    assert EXPIRES_AT not in stored(r)[0] and EXPIRES_IN not in stored(r)[0]


@pytest.mark.parametrize(
    "value",
    [0, -1, 0.0, "60", True, False, [60], {"s": 60}, float("nan"), float("inf"), 1_000_000_000, 10**30,
     timedelta(0), timedelta(seconds=-5), timedelta(days=20_000)],
    ids=repr,
)  # fmt: skip
def test_bad_expires_in_is_refused_at_set(value: Any) -> None:
    with pytest.raises(ValueError, match=r"expires_in must be seconds \(or a timedelta\) > 0"):
        plain.set(expires_in=value)


def test_bad_expires_in_is_refused_at_definition() -> None:
    with pytest.raises(ValueError, match="expires_in must be seconds"):
        job(expires_in="1 hour", wire_name="tests.never")(plain.__wrapped__)

    with pytest.raises(ValueError, match=r"Bad: expires_in must be seconds"):

        class Bad(Job, abstract=True):
            options = {"expires_in": -60}

    with pytest.raises(ValueError, match=r"Worse: expires_in must be seconds"):

        class Worse(Job, abstract=True):
            expires_in = "soon"


# On a worker: a job past its expires_at is skipped ------------------------------------------------


def test_an_expired_job_is_skipped_and_a_fresh_one_runs(
    workers: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="django_wurk.expiring")
    stale = hand_written("a" * 24, time.time() - 90, **{EXPIRES_IN: 30})
    push_raw(r, stale)
    assert refresh.perform_async("fresh")
    wait_for(lambda: ran(r, "fresh") == 1 and r.get(keys.STAT_EXPIRED) == b"1")
    wait_for(lambda: idle(r))
    assert ran(r, "a" * 24) == 0
    # Acknowledged like a success: not in a queue, a private list, the retry or the dead set.
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0
    today = keys.daily_stat("expired", datetime.now(UTC).date().isoformat())
    assert r.get(today) == b"1" and r.ttl(today) > keys.DAILY_STAT_TTL - 60
    # Counted as processed (Sidekiq Pro's rule: it returns like a job that finished), not failed.
    wait_for(lambda: r.get(keys.STAT_PROCESSED) == b"2")
    assert r.get(keys.STAT_FAILED) in (None, b"0")
    stats = Stats(wurk)
    assert (stats.expired, stats.processed, stats.failed) == (1, 2, 0)
    (line,) = [rec for rec in caplog.records if rec.name == "django_wurk.expiring"]
    assert line.levelno == logging.INFO
    message = line.getMessage()
    assert "a" * 24 in message and plain.wire_name in message and "'default'" in message
    late = float(message.split("expired ")[1].split(" sec")[0])
    assert 89 < late < 120
    assert (line.jid, line.job_class, line.queue) == ("a" * 24, plain.wire_name, "default")  # type: ignore[attr-defined]


def test_a_retry_past_its_expiry_is_skipped(workers: Launcher, r: Any) -> None:
    assert FailsOnce.set(expires_in=1).perform_async("once")
    wait_for(lambda: r.zcard(keys.RETRY) == 1)
    (entry,) = RetrySet(wurk)
    deadline = entry.payload[EXPIRES_AT] if entry.payload else None
    assert isinstance(deadline, float)  # the retry keeps the deadline it was pushed with
    wait_for(lambda: time.time() > deadline + 0.01, timeout=5)
    r.zadd(keys.RETRY, {entry.raw: time.time() - 1}, xx=True)  # due now
    wait_for(lambda: r.get(keys.STAT_EXPIRED) == b"1")
    wait_for(lambda: idle(r) and r.zcard(keys.RETRY) == 0)
    assert ran(r, "once") == 1  # the first, failed run only
    assert r.zcard(keys.DEAD) == 0


def test_an_expired_batch_job_counts_as_a_success(wurk: Wurk, r: Any) -> None:
    batch = Batch(description="expiring")
    batch.on("success", Recorder)
    batch.on("complete", Recorder)
    with batch.jobs():
        stale = plain.set(expires_in=0.05).perform_async("stale")
        fresh = plain.perform_async("fresh")
    assert stale and fresh
    deadline = stored_payload(r, stale)[EXPIRES_AT]
    wait_for(lambda: time.time() > deadline + 0.01, timeout=5)
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: {c["event"] for c in runs("callbacks")} == {"success", "complete"})
    finally:
        worker.stop()
    assert ran(r, "stale") == 0 and ran(r, "fresh") == 1
    assert r.get(keys.STAT_EXPIRED) == b"1"
    status = BatchStatus(batch.bid)
    assert status.pending == 0 and status.succeeded and status.failures == 0 and status.dead_jids == []


def stored_payload(r: Any, jid: str) -> dict[str, Any]:
    return next(p for p in stored(r) if p["jid"] == jid)


def test_skipped_without_a_worker_in_the_testing_modes(wurk: Wurk, r: Any) -> None:
    """``fake()`` drains through the same server middleware; it counts nothing in Redis."""
    with testing.fake() as jobs:
        plain.set(expires_in=0.05).perform_async("stale")
        plain.set(expires_in=60).perform_async("fresh")
        stale, _ = jobs.jobs_for(plain)
        wait_for(lambda: time.time() > stale[EXPIRES_AT] + 0.01, timeout=5)
        assert jobs.drain() == 2
    assert ran(r, "stale") == 0 and ran(r, "fresh") == 1
    assert r.get(keys.STAT_EXPIRED) is None


# Hostile and foreign payloads ---------------------------------------------------------------------


#: ``expires_at`` values no deadline can be read from: the job runs, with a warning.
UNREADABLE_EXPIRIES = [("text", "abc"), ("numeric text", "1700000000"), ("true", True), ("list", [1]),
                       ("object", {"t": 1}), ("negative", -5), ("zero", 0), ("400 digits", 10**400),
                       ("-400 digits", -(10**400))]  # fmt: skip


def test_an_unreadable_expires_at_runs_the_job_once_with_a_warning(
    workers: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="django_wurk.expiring")
    jids = {name: f"{i:024x}" for i, (name, _) in enumerate(UNREADABLE_EXPIRIES)}
    quiet = {"null": "f" * 24, "false": "e" * 24, "absent": "d" * 24, "1e308": "c" * 24}
    push_raw(
        r,
        *[hand_written(jids[name], value) for name, value in UNREADABLE_EXPIRIES],
        hand_written(quiet["null"], None),
        hand_written(quiet["false"], False),
        hand_written(quiet["absent"], KEEP_OUT),
        hand_written(quiet["1e308"], 1e308),
    )
    everyone = [*jids.values(), *quiet.values()]
    wait_for(lambda: all(ran(r, jid) == 1 for jid in everyone))
    wait_for(lambda: idle(r))
    assert all(ran(r, jid) == 1 for jid in everyone)
    assert r.get(keys.STAT_EXPIRED) is None and r.zcard(keys.DEAD) == 0 and r.zcard(keys.RETRY) == 0
    warned = [rec.getMessage() for rec in caplog.records if rec.name == "django_wurk.expiring"]
    assert len(warned) == len(UNREADABLE_EXPIRIES)
    assert all("running it as a job that does not expire" in w for w in warned)
    assert all(len(w) < 300 for w in warned)  # a 400-digit value is shortened in the log
    assert not any(jid in w for w in warned for jid in quiet.values())


@pytest.mark.parametrize("value", ["abc", -1, 0, 10**30, [], {"s": 1}, True], ids=repr)
def test_a_promoted_entry_with_unusable_expires_in_is_pushed_without_a_deadline(
    wurk: Wurk, r: Any, value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The poller promotes what Ruby (or garbage) scheduled; the client middleware must not
    raise (the entry would be stuck) and must not invent a deadline."""
    caplog.set_level(logging.WARNING, logger="django_wurk.expiring")
    entry = {"class": plain.wire_name, "args": [1], "queue": "default", "jid": "b" * 24, EXPIRES_IN: value}
    member = wire.dumps(entry).encode()
    r.zadd(keys.SCHEDULE, {member: time.time() - 1})
    assert wurk.client.promote(keys.SCHEDULE, member, entry)
    (pushed,) = stored(r)
    assert EXPIRES_AT not in pushed and pushed[EXPIRES_IN] == value
    assert "will not expire" in caplog.text


def test_a_promoted_ruby_entry_with_expires_in_gets_its_deadline_at_promotion(wurk: Wurk, r: Any) -> None:
    """Sidekiq (without Pro) scheduled it with ``expires_in`` only: as Sidekiq Pro's client
    middleware would on promotion, the clock starts now, not at ``created_at``."""
    entry = {"class": plain.wire_name, "args": [1], "queue": "default", "jid": "c" * 24, EXPIRES_IN: 30,
             "created_at": time.time() - 3600}  # fmt: skip
    member = wire.dumps(entry).encode()
    r.zadd(keys.SCHEDULE, {member: time.time() - 1})
    assert wurk.client.promote(keys.SCHEDULE, member, entry)
    (pushed,) = stored(r)
    assert pushed[EXPIRES_AT] == pytest.approx(time.time() + 30, abs=5)


def test_a_sidekiq_pro_payload_is_read_the_same_way(workers: Launcher, r: Any) -> None:
    """The keys and types Sidekiq Pro's expiry middleware writes: ``expires_in`` (seconds, as
    ``1.hour`` serialises) next to ``expires_at`` (float epoch seconds)."""
    ruby = hand_written("d" * 24, time.time() - 1.0, **{EXPIRES_IN: 3600})
    ruby_fresh = hand_written("e" * 24, time.time() + 3600.0, **{EXPIRES_IN: 3600})
    push_raw(r, ruby, ruby_fresh)
    wait_for(lambda: ran(r, "e" * 24) == 1 and r.get(keys.STAT_EXPIRED) == b"1")
    assert ran(r, "d" * 24) == 0


def test_a_stat_key_holding_junk_does_not_stop_the_skip(
    workers: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    r.rpush(keys.STAT_EXPIRED, "a list, not a counter")
    push_raw(r, hand_written("a" * 24, time.time() - 5))
    assert plain.perform_async("after")
    wait_for(lambda: ran(r, "after") == 1)
    wait_for(lambda: idle(r) and "could not count an expired job" in caplog.text)
    assert ran(r, "a" * 24) == 0
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0
    today = keys.daily_stat("expired", datetime.now(UTC).date().isoformat())
    assert r.get(today) == b"1"  # the daily count went through


def test_the_api_reads_junk_in_the_counter_as_zero(wurk: Wurk, r: Any) -> None:
    r.set(keys.STAT_EXPIRED, "1e400")
    assert Stats(wurk).expired == 0
    r.set(keys.STAT_EXPIRED, "7")
    assert Stats(wurk).expired == 7


def test_the_batches_middleware_stays_outside_whatever_order_they_are_given_in() -> None:
    """A skipped batch job is counted only if the batches middleware wraps the expiry check."""
    from django_wurk.core.features import batches, expiring

    for given in ((batches.FEATURE, expiring.FEATURE), (expiring.FEATURE, batches.FEATURE)):
        engine = Wurk(features=given)
        engine.use(given[1])  # the same feature again changes nothing
        order = [type(m).__name__ for m in engine.server_middleware]
        assert order == ["BatchServerMiddleware", "ExpiryServerMiddleware"]
