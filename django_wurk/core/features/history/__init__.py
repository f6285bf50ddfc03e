"""Historical metrics (Sidekiq Enterprise's ``retain_history``): the fleet's counters over days.

See ``docs/metrics.md``. ``feature(interval, retention)`` is a leader duty
(``core/features/periodic/duties.py``): the process that leads the fleet writes one snapshot
every ``interval`` seconds into the stream ``history:metrics`` (``keys.py`` has the fields),
trimmed to ``retention`` seconds. No second election: the fleet's one election
(``periodic.leadership``) decides who leads, so a process kept out of it
(``WURK["LEADER"] = False``) never records, and while no process leads nothing is recorded
(the gap shows in the history). It needs no periodic jobs, only the election.
``History`` reads the snapshots back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.api import QueueGauge
from django_wurk.core.feature import Feature, Plug
from django_wurk.core.features.history.keys import STREAM
from django_wurk.core.features.history.reader import History, Snapshot
from django_wurk.core.features.periodic.duties import while_leading

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.features.history.recorder import Recorder

#: Seconds between snapshots: Sidekiq Enterprise's default for ``retain_history``.
DEFAULT_INTERVAL = 30.0
#: How long snapshots are kept (seconds): 7 days.
DEFAULT_RETENTION = 7 * 24 * 3600.0
DUTY = "history"


def feature(interval: float = DEFAULT_INTERVAL, retention: float = DEFAULT_RETENTION) -> Feature:
    """The leader records a snapshot every ``interval`` seconds, kept ``retention`` seconds."""
    if not (isinstance(interval, (int, float)) and interval > 0 and interval < float("inf")):
        raise ValueError(f"the history interval must be a number of seconds above 0, got {interval!r}")
    if not (isinstance(retention, (int, float)) and retention >= interval and retention < float("inf")):
        raise ValueError(
            f"the history retention must be at least the interval ({interval!r} s), got {retention!r}"
        )

    def history_duty(engine: Wurk, identity: str) -> Recorder:
        from django_wurk.core.features.history.recorder import Recorder

        return Recorder(engine, identity, float(interval), float(retention))

    def plug(wurk: Wurk) -> Plug:
        return Plug(events=while_leading(wurk, history_duty))

    return Feature(DUTY, plug)


__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_RETENTION",
    "STREAM",
    "History",
    "QueueGauge",
    "Snapshot",
    "feature",
]
