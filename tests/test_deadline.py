"""Deadlines: ``@job(deadline=SECONDS)`` (or an aware datetime, also through ``set(...)``).

``deadline`` becomes ``deadline_at`` at the first push (seconds from then, whatever the
scheduled time, or the absolute time given) and is never moved by a retry or a promotion; a
worker never starts a job past it, whatever retries it has left, and counts it as expired
(as Pro's expiring jobs). Real workers run the jobs, which record every run in Redis.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Job, Wurk, job, wurk
from django_wurk.api import RetrySet, Stats
from django_wurk.core import keys, wire
from django_wurk.core.features.expiring import DEADLINE, DEADLINE_AT
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp.collapse_jobs import before_the_deadline, runs


def stored(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in reversed(r.lrange(keys.queue(queue), 0, -1))]


def idle(r: Any) -> bool:
    fetched = any(r.llen(k) for k in r.scan_iter(match="queue:sq|*"))
    return not fetched and r.llen(keys.queue("default")) == 0


def never_defined(n: int) -> None:
    """The function the option checks try to make a job of (refused every time)."""


# Options ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, -5, "10m", float("nan"), float("inf"), True, datetime(2030, 1, 1)], ids=repr
)
def test_a_bad_deadline_is_refused_at_set_and_at_definition(value: Any) -> None:
    with pytest.raises(ValueError, match="deadline"):
        before_the_deadline.set(deadline=value)
    with pytest.raises(ValueError, match="deadline"):
        job(deadline=value)(never_defined)


def test_a_datetime_deadline_is_stored_as_epoch_seconds() -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert before_the_deadline.set(deadline=when).options[DEADLINE] == when.timestamp()
    assert before_the_deadline.set(deadline=timedelta(minutes=5)).options[DEADLINE] == 300


# At push --------------------------------------------------------------------------------------


def test_deadline_at_counts_from_the_first_push(wurk: Wurk, r: Any) -> None:
    before = time.time()
    before_the_deadline.perform_async(1)
    after = time.time()
    [payload] = stored(r)
    assert payload[DEADLINE] == 600 and before + 600 <= payload[DEADLINE_AT] <= after + 600


def test_a_scheduled_job_s_deadline_counts_from_the_push_not_its_time(wurk: Wurk, r: Any) -> None:
    before = time.time()
    before_the_deadline.perform_in(3600, 2)
    [(member, _)] = r.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    assert json.loads(member)[DEADLINE_AT] < before + 700  # the push + 600, not the time + 600


def test_an_absolute_deadline_is_kept_as_given(wurk: Wurk, r: Any) -> None:
    when = datetime.now(UTC) + timedelta(days=2)
    before_the_deadline.set(deadline=when).perform_async(3)
    [payload] = stored(r)
    assert payload[DEADLINE_AT] == pytest.approx(when.timestamp())


def test_a_given_deadline_at_is_never_moved(wurk: Wurk, r: Any) -> None:
    wurk.client.push({"class": before_the_deadline.wire_name, "args": [4], "queue": "default",
                      DEADLINE: 600, DEADLINE_AT: 1234567890.5})  # fmt: skip
    [payload] = stored(r)
    assert payload[DEADLINE_AT] == 1234567890.5


# On a worker ------------------------------------------------------------------------------------


def test_a_job_past_its_deadline_is_not_started_and_counts_as_expired(
    workers: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="django_wurk.expiring")
    late = wire.dumps({"class": before_the_deadline.wire_name, "args": [5], "queue": "default",
                       "jid": "d" * 24, "retry": 5, "created_at": time.time(), DEADLINE: 600, DEADLINE_AT: time.time() - 30})  # fmt: skip
    r.sadd(keys.QUEUES, "default")
    r.lpush(keys.queue("default"), late)
    before_the_deadline.perform_async(6)
    wait_for(lambda: runs("before_the_deadline") == [6] and r.get(keys.STAT_EXPIRED) == b"1")
    wait_for(lambda: idle(r))
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0
    assert Stats(wurk).expired == 1
    [line] = [rec.getMessage() for rec in caplog.records if rec.name == "django_wurk.expiring"]
    assert "d" * 24 in line and "passed its deadline" in line


def test_the_deadline_holds_across_retries(workers: Launcher, r: Any) -> None:
    """A job that failed and still has four retries is not started again past its deadline."""
    r.set("deadline:fail:7", 1)
    jid = before_the_deadline.perform_async(7)
    wait_for(lambda: r.zcard(keys.RETRY) == 1, timeout=30)
    (entry,) = RetrySet(wurk)
    assert entry.payload is not None and entry.payload["jid"] == jid
    first_deadline = entry.payload[DEADLINE_AT]
    # The deadline passes while it waits for its retry (written as though 601 s went by).
    passed = {**entry.payload, DEADLINE_AT: time.time() - 1}
    assert first_deadline > time.time() + 500  # the retry kept the deadline of its first push
    r.zrem(keys.RETRY, entry.raw)
    r.delete("deadline:fail:7")  # it would succeed now, were it started
    r.zadd(keys.RETRY, {wire.dumps(passed): time.time() - 1})
    wait_for(lambda: r.get(keys.STAT_EXPIRED) == b"1", timeout=30)
    wait_for(lambda: idle(r) and r.zcard(keys.RETRY) == 0)
    assert runs("before_the_deadline:failed") == [7] and runs("before_the_deadline") == []
    assert r.zcard(keys.DEAD) == 0


class Deadlined(Job):
    deadline = 120  # a feature's option as a class attribute, like ``queue``

    def perform(self) -> None:
        wurk.redis.rpush("seen:Deadlined", 1)


def test_a_class_attribute_deadline_is_stamped(wurk: Wurk, r: Any) -> None:
    Deadlined.perform_async()
    [payload] = stored(r)
    assert payload[DEADLINE] == 120 and payload[DEADLINE_AT] > time.time() + 100


# Another producer's values ------------------------------------------------------------------------

UNREADABLE = [("text", "abc"), ("numeric text", "1700000000"), ("true", True), ("list", [1]),
              ("object", {"t": 1}), ("negative", -5), ("zero", 0), ("400 digits", 10**400),
              ("-400 digits", -(10**400)), ("nan text", "NaN")]  # fmt: skip


def test_an_unreadable_deadline_at_runs_the_job_once_with_a_warning(
    workers: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="django_wurk.expiring")
    r.sadd(keys.QUEUES, "default")
    for i, (_, value) in enumerate(UNREADABLE):
        r.lpush(keys.queue("default"), wire.dumps({"class": before_the_deadline.wire_name, "args": [100 + i],
                "queue": "default", "jid": f"{i:024x}", "created_at": time.time(), DEADLINE_AT: value}))  # fmt: skip
    wait_for(lambda: sorted(runs("before_the_deadline")) == [100 + i for i in range(len(UNREADABLE))])
    wait_for(lambda: idle(r))
    assert r.get(keys.STAT_EXPIRED) is None and r.zcard(keys.DEAD) == 0 and r.zcard(keys.RETRY) == 0
    warned = [rec.getMessage() for rec in caplog.records if rec.name == "django_wurk.expiring"]
    assert len(warned) == len(UNREADABLE) and all("deadline_at" in w for w in warned)
    assert all(len(w) < 300 for w in warned)


@pytest.mark.parametrize("value", ["abc", -1, 0, True, [], {"s": 1}, 10**400], ids=repr)
def test_a_pushed_payload_with_an_unusable_deadline_gets_none(
    wurk: Wurk, r: Any, value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Another producer's payload (an outbox row, a promotion): pushed, without a deadline."""
    caplog.set_level(logging.WARNING, logger="django_wurk.expiring")
    jid = wurk.client.push({"class": before_the_deadline.wire_name, "args": [1], "queue": "default",
                            DEADLINE: value})  # fmt: skip
    [payload] = stored(r)
    assert payload["jid"] == jid and DEADLINE_AT not in payload
    assert any("it has no deadline" in rec.getMessage() for rec in caplog.records)
