"""One bounded read of the queues and the three sets, shared by the Prometheus scrape and
the StatsD gauges, so both see the same numbers and neither needs the other's library.

At most ``MAX_QUEUES`` queues (in name order) are read, in one pipeline, so a Redis holding
thousands of queue names cannot make a read slow; ``queues`` says how many there are in all.
A key of the wrong type reads as 0; a Redis error propagates (the caller decides).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_wurk.core import keys, priority, wire
from django_wurk.core.api import QueueGauge

if TYPE_CHECKING:
    from redis import Redis

MAX_QUEUES = 100


def queue_name(raw: bytes) -> str:
    """Names that are not UTF-8 are shown with ``\\x..`` escapes."""
    return raw.decode("utf-8", "backslashreplace")


def oldest_age(raw: object, now: float) -> float:
    """Seconds since the oldest job's ``enqueued_at``; 0 for an empty queue or a junk job."""
    if not isinstance(raw, bytes):
        return 0.0
    try:
        payload = wire.loads(raw)
    except wire.PayloadError:
        return 0.0
    stamp = wire.read_stamp(payload.get("enqueued_at"))
    return max(0.0, now - stamp) if stamp is not None else 0.0


@dataclass(frozen=True)
class Reading:
    #: Queues known to Redis, all of them.
    queues: int
    #: The first ``MAX_QUEUES`` of them, in name order.
    shown: list[QueueGauge]
    retry: int
    scheduled: int
    dead: int


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def read(redis: Redis) -> Reading:
    # A queue's priority lists are read with it, as one queue (core/priority.py).
    found = priority.group(n for n in redis.smembers(keys.QUEUES) if isinstance(n, bytes))
    names = sorted(found)
    shown = names[:MAX_QUEUES]
    pipe = redis.pipeline(transaction=False)
    for name in shown:
        for listed in found[name]:
            raw_key = keys.queue("").encode() + listed  # the name's own bytes, UTF-8 or not
            pipe.llen(raw_key)
            pipe.lindex(raw_key, -1)
    for key in (keys.RETRY, keys.SCHEDULE, keys.DEAD):
        pipe.zcard(key)
    replies = iter(pipe.execute(raise_on_error=False))  # a key of the wrong type reads as 0
    now = time.time()
    gauges = []
    for name in shown:
        size, age = 0, 0.0
        for _ in found[name]:
            size += _count(next(replies))
            age = max(age, oldest_age(next(replies), now))
        gauges.append(QueueGauge(queue_name(name), size, age))
    retry, scheduled, dead = (_count(v) for v in replies)
    return Reading(len(names), gauges, retry, scheduled, dead)


@dataclass(frozen=True)
class Totals:
    """The fleet's counters as Sidekiq's ``Stats`` gives them, read so junk reads as 0."""

    processed: int
    failed: int
    #: Jobs waiting in every queue (all of them: a sum is one number however many queues).
    enqueued: int
    #: Job threads running a job, by the processes' heartbeats.
    busy: int
    processes: int


def _number(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        try:
            return max(int(value), 0)
        except ValueError:
            return 0
    return 0


def _members(value: object) -> list[bytes]:
    return [m for m in value if isinstance(m, bytes)] if isinstance(value, set) else []


def totals(redis: Redis) -> Totals:
    pipe = redis.pipeline(transaction=False)
    pipe.get(keys.STAT_PROCESSED)
    pipe.get(keys.STAT_FAILED)
    pipe.smembers(keys.PROCESSES)
    pipe.smembers(keys.QUEUES)
    processed, failed, processes, queues = pipe.execute(raise_on_error=False)
    identities, names = _members(processes), _members(queues)
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(keys.queue("").encode() + name)
    for identity in identities:
        pipe.hget(identity, "busy")
    replies = pipe.execute(raise_on_error=False) if names or identities else []
    return Totals(
        _number(processed),
        _number(failed),
        sum(_number(v) for v in replies[: len(names)]),
        sum(_number(v) for v in replies[len(names) :]),
        len(identities),
    )
