"""Queue sizes and latency, read from Redis when Prometheus scrapes, not kept in memory.

Every worker sees the same queues, so these are gauges of the Redis server, not of the
process: read at scrape time they are never stale and cost nothing between scrapes. A
scrape reads at most ``MAX_QUEUES`` queues (in name order) in one pipeline, so a Redis
holding thousands of queue names cannot make a scrape slow; ``wurk_queues`` says how
many there are in all (``reading``, shared with the StatsD gauges).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from django_wurk.core.features.observability import reading

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from django_wurk.core.engine import Wurk


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
        found = reading.read(self.wurk.redis)
        count = GaugeMetricFamily("wurk_queues", "Queues known to Redis (only the first 100 are shown).")
        count.add_metric([], found.queues)
        size = GaugeMetricFamily("wurk_queue_size", "Jobs waiting in the queue.", labels=["queue"])
        latency = GaugeMetricFamily(
            "wurk_queue_latency_seconds", "Age of the oldest waiting job.", labels=["queue"]
        )
        for queue in found.shown:
            size.add_metric([queue.name], queue.size)
            latency.add_metric([queue.name], queue.latency)
        yield from (count, size, latency)
        for metric, about, value in (
            ("wurk_retry_set_size", "Jobs waiting to be retried.", found.retry),
            ("wurk_scheduled_set_size", "Jobs scheduled for later.", found.scheduled),
            ("wurk_dead_set_size", "Jobs in the dead set.", found.dead),
        ):
            family = GaugeMetricFamily(metric, about)
            family.add_metric([], value)
            yield family
