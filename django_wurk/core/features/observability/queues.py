"""Queue sizes and latency, read from Redis when Prometheus scrapes, not kept in memory.

Every worker sees the same queues, so these are gauges of the Redis server, not of the
process: read at scrape time they are never stale and cost nothing between scrapes. A
scrape reads at most ``MAX_QUEUES`` queues (in name order) in one pipeline, so a Redis
holding thousands of queue names cannot make a scrape slow; ``wurk_queues`` says how
many there are in all. Names that are not UTF-8 are shown with ``\\x..`` escapes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from django_wurk.core import keys, wire

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from django_wurk.core.engine import Wurk

MAX_QUEUES = 100


def queue_name(raw: bytes) -> str:
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


class QueueCollector(Collector):
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("wurk_redis_up", "Whether Redis answered this scrape's reads.")
        try:
            families = list(self._read())
        except RedisError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _read(self) -> Iterator[Metric]:
        redis = self.wurk.redis
        names = sorted(n for n in redis.smembers(keys.QUEUES) if isinstance(n, bytes))
        shown = names[:MAX_QUEUES]
        pipe = redis.pipeline(transaction=False)
        for name in shown:
            raw_key = keys.queue("").encode() + name  # the name's own bytes, UTF-8 or not
            pipe.llen(raw_key)
            pipe.lindex(raw_key, -1)
        for key in (keys.RETRY, keys.SCHEDULE, keys.DEAD):
            pipe.zcard(key)
        replies = pipe.execute(raise_on_error=False)  # a key of the wrong type reads as 0
        now = time.time()
        count = GaugeMetricFamily("wurk_queues", "Queues known to Redis (only the first 100 are shown).")
        count.add_metric([], len(names))
        size = GaugeMetricFamily("wurk_queue_size", "Jobs waiting in the queue.", labels=["queue"])
        latency = GaugeMetricFamily(
            "wurk_queue_latency_seconds", "Age of the oldest waiting job.", labels=["queue"]
        )
        for i, name in enumerate(shown):
            length, oldest = replies[2 * i], replies[2 * i + 1]
            size.add_metric([queue_name(name)], length if isinstance(length, int) else 0)
            latency.add_metric([queue_name(name)], oldest_age(oldest, now))
        yield from (count, size, latency)
        for (metric, about), value in zip(
            (
                ("wurk_retry_set_size", "Jobs waiting to be retried."),
                ("wurk_scheduled_set_size", "Jobs scheduled for later."),
                ("wurk_dead_set_size", "Jobs in the dead set."),
            ),
            replies[2 * len(shown) :],
            strict=True,
        ):
            family = GaugeMetricFamily(metric, about)
            family.add_metric([], value if isinstance(value, int) else 0)
            yield family
