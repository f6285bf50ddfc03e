"""The job-status feature's setting: how long a tracked job's status is kept."""

from __future__ import annotations

from dataclasses import dataclass

from django_wurk.core.config import ConfigError


@dataclass(frozen=True)
class StatusSettings:
    """``WURK["STATUS_RETENTION"]``, as its field in lower case."""

    #: Seconds a ``track=True`` job's status (``status:<jid>``) is kept after its last change.
    status_retention: int = 1800

    def __post_init__(self) -> None:
        if not self.status_retention > 0:
            raise ConfigError("STATUS_RETENTION", f"must be greater than 0, got {self.status_retention!r}")
