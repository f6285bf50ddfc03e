"""Which per-job metrics layouts a worker writes: what the fleet's Metrics tabs can read.

Sidekiq 8 reads ``j|YYMMDD|H:MM`` and ``h|Class-D-H:M``, Sidekiq 7.x ``j|YYYYMMDD|H:M`` and
``Class-DD-HH:M``; neither reads the other's. ``METRICS_LAYOUT`` names the layouts outright
(``"8"``, ``"7"``, ``"both"``), or ``"auto"``: Sidekiq 8's, plus 7's while a Sidekiq 7.x
process is in the process set. A Web UI is not a process, so a Sidekiq 7 Web UI over a fleet
with no Sidekiq 7 worker needs ``"both"``. The process set is read once a minute, not every
beat: a fleet of hundreds of processes costs one pipeline of ``HGET``s per process per minute.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk.core import keys
from django_wurk.core.worker.stats import ONLY_8, SIDEKIQ7, SIDEKIQ8

#: How often ``"auto"`` looks at the process set again (seconds).
RECHECK = 60.0
BOTH = frozenset({SIDEKIQ7, SIDEKIQ8})
FIXED = {"8": ONLY_8, "7": frozenset({SIDEKIQ7}), "both": BOTH}


def sidekiq7_version(info: Any) -> bool:
    """Whether a process hash's ``info`` (JSON text) says Sidekiq 7.x; junk says no."""
    try:
        version = json.loads(info).get("version") if info else None
    except (ValueError, AttributeError, TypeError):
        return False
    return isinstance(version, str) and version.startswith("7.")


def fleet_has_sidekiq7(redis: Any) -> bool:
    """Whether any process in the process set is a Sidekiq 7.x (our own processes write our
    version, ``0.x``, so they never count)."""
    members = list(redis.smembers(keys.PROCESSES))
    if not members:
        return False
    pipe = redis.pipeline(transaction=False)
    for member in members:
        pipe.hget(member, "info")
    infos = pipe.execute(raise_on_error=False)  # a member that is no hash answers an error: not 7.x
    return any(sidekiq7_version(info) for info in infos if isinstance(info, bytes))


class MetricsLayouts:
    """``current()``: the layouts to write at this beat."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self._auto = ONLY_8
        self._checked_at = float("-inf")

    def current(self, redis: Any) -> frozenset[str]:
        fixed = FIXED.get(self.setting)
        if fixed is not None:
            return fixed
        now = time.monotonic()
        if now - self._checked_at >= RECHECK:
            self._auto = BOTH if fleet_has_sidekiq7(redis) else ONLY_8  # a Redis error: again next beat
            self._checked_at = now
        return self._auto
