"""Observability: Prometheus metrics and Kubernetes probes on a health port.

See ``docs/observability.md``. ``features(health)`` counts every execution of a worker (the
``metrics`` feature: a server middleware, the retry and death hooks, the Redis outage
counter) and, given ``HealthOptions``, has each worker process serve ``/metrics``, ``/live``
and ``/ready`` (the ``health`` feature). A ``-P N`` swarm gives its children no options and
serves the port from its supervisor instead (``supervisor``). prometheus-client is imported
only when they are built, so it stays an optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.events import Process
from django_wurk.core.feature import Feature, Plug
from django_wurk.core.features.observability.options import HealthOptions

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


def health_feature(health: HealthOptions) -> Feature:
    """Each worker process serves the health port ``health`` while it runs."""

    def plug(wurk: Wurk) -> Plug:
        def serve(process: Process) -> None:
            from django_wurk.core.features.observability.service import health_server

            server = health_server(wurk, process.identity, health)
            server.start()
            process.at_stop(server.stop)

        return Plug(events={"startup": serve})

    return Feature("health", plug)


def features(health: HealthOptions | None = None) -> tuple[Feature, ...]:
    """Counting, and with ``health`` the port: what ``runwurk`` uses for ``HEALTH_PORT``."""
    from django_wurk.core.features.observability import metrics

    return (metrics.FEATURE,) if health is None else (metrics.FEATURE, health_feature(health))


__all__ = ["HealthOptions", "features", "health_feature"]
