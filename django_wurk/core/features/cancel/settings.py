"""The cancel feature's setting: how long a running job has to stop once it is cancelled."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django_wurk.core.config import ConfigError


@dataclass(frozen=True)
class CancelSettings:
    """``WURK["CANCEL_GRACE"]``, as its field in lower case."""

    #: Seconds a running job has, from the moment its worker sees it cancelled, to stop by
    #: itself (``current_job().cancelled``) before ``Cancelled`` is raised in its thread.
    cancel_grace: float = 5.0

    def __post_init__(self) -> None:
        grace = self.cancel_grace
        if (
            isinstance(grace, bool)
            or not isinstance(grace, (int, float))
            or not math.isfinite(grace)
            or grace < 0
        ):
            raise ConfigError("CANCEL_GRACE", f"must be seconds >= 0, got {grace!r}")
