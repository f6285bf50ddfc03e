"""Observability: Prometheus metrics and Kubernetes probes on a health port.

See ``docs/observability.md``. ``install(wurk, health)`` counts every execution of
``wurk``'s workers (a server middleware, the retry and death hooks, the Redis outage
counter) and, given ``HealthOptions``, has each worker process serve ``/metrics``,
``/live`` and ``/ready``. A ``-P N`` swarm passes no options to its children and serves
the port from its supervisor instead (``supervisor``). prometheus-client is imported
only here, so it stays an optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.features.observability.options import HealthOptions

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.service import Service


def install(wurk: Wurk, health: HealthOptions | None = None) -> None:
    """Count ``wurk``'s jobs; with ``health``, each worker process serves the health port."""
    from django_wurk.core.features.observability import metrics
    from django_wurk.core.features.observability.service import ObservabilityService

    metrics.install(wurk)

    def observability_service(engine: Wurk, identity: str, outage: Outage) -> Service:
        return ObservabilityService(engine, identity, outage, health)

    observability_service.observability = True  # type: ignore[attr-defined]
    wurk.services[:] = [s for s in wurk.services if not getattr(s, "observability", False)]
    wurk.services.append(observability_service)


__all__ = ["HealthOptions", "install"]
