"""Where the health port listens; importing it needs no prometheus-client."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HealthOptions:
    port: int
    bind: str = "0.0.0.0"
    #: Seconds a heartbeat stays fresh for ``/ready`` (Sidekiq Enterprise's default).
    ready_window: float = 30.0
