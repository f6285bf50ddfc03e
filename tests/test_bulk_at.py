"""``perform_bulk(..., at=, spread_interval=)`` as Sidekiq 8's ``push_bulk`` takes them.

``at``: one time for every job or one per job; ``spread_interval``: each job at a random
moment within that many seconds (at least 5, the scheduler's pace). Checked before anything
is pushed, so a bad call loses and writes nothing. Read back from Redis as stored.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Config, Wurk, job
from django_wurk.core import keys
from django_wurk.core.client import EnqueueError
from tests.conftest import wait_for


@job
def mail(n: int) -> None: ...


def scheduled(r: Any) -> dict[str, tuple[dict[str, Any], float]]:
    """The schedule set by jid: (payload, score)."""
    out = {}
    for member, score in r.zrange(keys.SCHEDULE, 0, -1, withscores=True):
        payload = json.loads(member)
        out[payload["jid"]] = (payload, score)
    return out


def test_one_time_schedules_every_job_at_it(wurk: Wurk, r: Any) -> None:
    when = time.time() + 3600
    jids = mail.perform_bulk([[1], [2], [3]], at=when)
    found = scheduled(r)
    assert set(found) == set(jids) and len(jids) == 3
    assert all(score == pytest.approx(when) for _, score in found.values())
    assert [found[jid][0]["args"] for jid in jids] == [[1], [2], [3]]
    assert all("enqueued_at" not in p and "at" not in p for p, _ in found.values())
    assert r.llen(keys.queue("default")) == 0


def test_a_list_gives_each_job_its_own_time_across_batches(wurk: Wurk, r: Any) -> None:
    now = time.time()
    times = [now + 1000 + i for i in range(7)]
    jids = mail.perform_bulk([[i] for i in range(7)], batch_size=3, at=times)
    found = scheduled(r)
    assert [found[jid][1] for jid in jids] == pytest.approx(times)
    assert [found[jid][0]["args"] for jid in jids] == [[i] for i in range(7)]


def test_an_aware_datetime_works_and_a_past_time_pushes_now(wurk: Wurk, r: Any) -> None:
    soon = datetime.now(UTC) + timedelta(hours=1)
    past = datetime.now(UTC) - timedelta(hours=1)
    later, now = mail.perform_bulk([[1], [2]], at=[soon, past])
    assert set(scheduled(r)) == {later}
    assert [json.loads(x)["jid"] for x in r.lrange(keys.queue("default"), 0, -1)] == [now]


def test_spread_interval_spreads_the_jobs_over_at_least_five_seconds(wurk: Wurk, r: Any) -> None:
    before = time.time()
    jids = mail.perform_bulk([[i] for i in range(200)], spread_interval=1)
    after = time.time()
    scores = [score for _, score in scheduled(r).values()]
    assert len(scores) == len(jids) == 200
    assert all(before <= s <= after + 5 for s in scores)
    # Widened to five seconds: 200 draws within the first second would be a 5**-200 chance.
    assert max(scores) > after + 1
    assert len(set(scores)) > 150  # each its own time


def test_spread_interval_takes_a_timedelta_and_set_options_hold(wurk: Wurk, r: Any) -> None:
    before = time.time()
    mail.set(queue="mailers").perform_bulk([[1], [2]], spread_interval=timedelta(minutes=10))
    found = scheduled(r)
    assert all(p["queue"] == "mailers" for p, _ in found.values())
    assert all(before <= s <= before + 601 for _, s in found.values())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"at": time.time() + 60, "spread_interval": 60}, "at or spread_interval, not both"),
        ({"spread_interval": 0}, "spread_interval must be seconds > 0"),
        ({"spread_interval": -3}, "spread_interval must be seconds > 0"),
        ({"spread_interval": "60"}, "spread_interval must be seconds > 0"),
        ({"at": []}, "at is an empty list"),
        ({"at": "tomorrow"}, "at must be a time or a list of times"),
        ({"at": 60}, "must be a time"),  # a delay given where a time is wanted
        ({"at": datetime(2031, 1, 1)}, "aware datetime"),
        ({"at": [time.time() + 60, "x", time.time()]}, r"at\[1\] must be epoch seconds"),
        ({"at": [time.time() + 60] * 2}, "at has 2 times for 3 jobs"),
    ],
)
def test_bad_times_are_refused_before_anything_is_pushed(
    wurk: Wurk, r: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        mail.perform_bulk([[1], [2], [3]], **kwargs)
    assert r.zcard(keys.SCHEDULE) == 0 and r.llen(keys.queue("default")) == 0


def test_without_times_the_jobs_go_to_their_queue(wurk: Wurk, r: Any) -> None:
    jids = mail.perform_bulk([[1], [2]])
    assert [json.loads(x)["jid"] for x in reversed(r.lrange(keys.queue("default"), 0, -1))] == jids


def test_a_slice_of_spread_jobs_is_written_in_one_round_trip(
    wurk: Wurk, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Sidekiq's one ZADD per slice: 250 jobs of 250 times, batch_size 100, three writes."""
    line = wurk.lines.get()
    writes: list[int] = []
    send = line.pipeline

    def counted(commands: list[tuple[Any, ...]]) -> list[Any]:
        writes.append(sum(len(c) - 2 for c in commands if c[0] == "ZADD") // 2)
        return send(commands)

    monkeypatch.setattr(line, "pipeline", counted)
    jids = mail.perform_bulk([[i] for i in range(250)], batch_size=100, spread_interval=600)
    assert writes == [100, 100, 50]
    assert r.zcard(keys.SCHEDULE) == 250 and len(set(jids)) == 250


@pytest.mark.django_db(transaction=True)
def test_spread_jobs_pushed_in_a_transaction_are_written_at_its_commit(wurk: Wurk, r: Any) -> None:
    from django.db import transaction

    with transaction.atomic():
        jids = mail.perform_bulk([[i] for i in range(20)], spread_interval=60)
        assert r.zcard(keys.SCHEDULE) == 0
    assert set(scheduled(r)) == set(jids) and len(jids) == 20
    with pytest.raises(RuntimeError), transaction.atomic():
        mail.perform_bulk([[i] for i in range(20)], spread_interval=60)
        raise RuntimeError("roll back")
    assert r.zcard(keys.SCHEDULE) == 20


DEAD_REDIS = "redis://127.0.0.1:1/0"


def test_spread_jobs_meet_an_outage_as_any_push(wurk: Wurk, r: Any, test_config: Config) -> None:
    """No buffer: ``EnqueueError`` naming the jobs; with ``CLIENT_BUFFER``: kept, each with its
    own time, and written when Redis answers again."""
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with pytest.raises(EnqueueError, match="could not push 3 job"):
        mail.perform_bulk([[1], [2], [3]], spread_interval=60)
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, client_buffer=10, redis_socket_timeout=0.5))
    times = [time.time() + 1000 + i for i in range(3)]
    jids = mail.perform_bulk([[1], [2], [3]], at=times)
    assert wurk.writer.buffered == 3
    wurk.configure(test_config.replace(client_buffer=10))
    wait_for(lambda: wurk.writer.buffered == 0, timeout=30)
    found = scheduled(r)
    assert [found[jid][1] for jid in jids] == pytest.approx(times)
