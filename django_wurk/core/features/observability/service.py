"""A worker process's own health port, when it runs alone (no ``-P``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.features.observability import exposition
from django_wurk.core.features.observability.health import HealthServer, heartbeat_verdict
from django_wurk.core.features.observability.options import HealthOptions

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


def health_server(wurk: Wurk, identity: str, health: HealthOptions) -> HealthServer:
    """One worker process's health port (``runwurk`` without ``-P``)."""
    window = health.ready_window
    return HealthServer(
        health.bind,
        health.port,
        metrics=exposition.single_process(wurk),
        live=lambda: (True, f"{identity} running"),
        ready=lambda: heartbeat_verdict(wurk.redis, [identity], window),
    )
