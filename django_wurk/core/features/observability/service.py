"""Each worker process's part: count its Redis errors and, alone (no ``-P``), serve the port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.features.observability import exposition, metrics
from django_wurk.core.features.observability.health import HealthServer, heartbeat_verdict
from django_wurk.core.features.observability.options import HealthOptions

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.worker.outage import Outage


class ObservabilityService:
    def __init__(self, wurk: Wurk, identity: str, outage: Outage, health: HealthOptions | None) -> None:
        outage.listeners.append(metrics.count_redis_error)
        self.server: HealthServer | None = None
        if health is not None:
            window = health.ready_window
            self.server = HealthServer(
                health.bind,
                health.port,
                metrics=exposition.single_process(wurk),
                live=lambda: (True, f"{identity} running"),
                ready=lambda: heartbeat_verdict(wurk.redis, [identity], window),
            )

    def start(self) -> None:
        if self.server is not None:
            self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
