"""What ``/metrics`` answers: the text format of a registry built for one process or a swarm."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Iterator
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


class _Children(Collector):
    """Every child's files in ``path``, added up, leaving out the ones still being created.

    A child that has just started creates its file empty and only then sizes it: reading it
    in that instant fails (prometheus-client's own collector then fails the whole scrape, a
    500 each time a child is replaced). An empty file holds no samples yet, so it is skipped.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterable[Metric]:
        from prometheus_client.multiprocess import MultiProcessCollector

        files = []
        for name in glob.glob(os.path.join(self.path, "*.db")):
            try:
                if os.path.getsize(name) > 0:
                    files.append(name)
            except OSError:  # a dead child's file removed meanwhile
                continue
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call,no-any-return]


def multi_process(wurk: Wurk, path: str) -> Exposition:
    """Every child's files in ``path`` added up, and the queues read once, by the supervisor."""
    registry = CollectorRegistry()
    registry.register(_Children(path))
    registry.register(QueueCollector(wurk))
    return _render(registry)
