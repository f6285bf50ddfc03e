"""What ``/metrics`` answers: the text format of a registry built for one process or a swarm."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from django_wurk.core.features.observability import metrics
from django_wurk.core.features.observability.queues import QueueCollector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from django_wurk.core.engine import Wurk

Exposition = Callable[[], tuple[bytes, str]]


class _Registered(Collector):
    """This process's own series, as one collector of the scrape's registry."""

    def collect(self) -> Iterator[Metric]:
        return iter(metrics.REGISTRY.collect())


def _render(registry: CollectorRegistry) -> Exposition:
    return lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)


def single_process(wurk: Wurk) -> Exposition:
    registry = CollectorRegistry()
    registry.register(_Registered())
    registry.register(QueueCollector(wurk))
    return _render(registry)


def multi_process(wurk: Wurk, path: str) -> Exposition:
    """Every child's files in ``path`` added up, and the queues read once, by the supervisor."""
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path)  # type: ignore[no-untyped-call]
    registry.register(QueueCollector(wurk))
    return _render(registry)
