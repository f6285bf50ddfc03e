"""Cancelling a job by id: ``cancel(jid)``, and ``current_job().cancelled`` inside a job.

See ``docs/cancel.md``. ``FEATURE`` plugs in the server middleware that ends a cancelled
job at its start (and records one that stopped while running), and, at each worker
process's ``startup``, the watcher that sees running jobs cancelled and has the timeouts'
watchdog stop those that do not stop themselves within ``WURK["CANCEL_GRACE"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django_wurk.core.control import Cancelled
from django_wurk.core.events import Process
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.features.cancel.current import CurrentJob, current_job
from django_wurk.core.features.cancel.finder import cancel, settle
from django_wurk.core.features.cancel.flag import CancelError, Recent
from django_wurk.core.features.cancel.middleware import CancelServerMiddleware, RunningJobs
from django_wurk.core.features.cancel.settings import CancelSettings
from django_wurk.core.features.cancel.watcher import Watcher

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


def plug(wurk: Wurk) -> Plug:
    running = RunningJobs()
    recent = Recent()

    def deadlines() -> Any:
        """The timeouts feature's deadline table in this engine, if it is used."""
        timeouts = wurk.feature("timeouts")
        server = timeouts.server if timeouts is not None else None
        return getattr(server, "deadlines", None)

    def start_watcher(process: Process) -> None:
        grace = wurk.config.section(CancelSettings).cancel_grace
        watcher = Watcher(wurk, running, deadlines, grace, settle, recent)
        watcher.start()
        process.at_stop(watcher.stop)

    return Plug(
        server=CancelServerMiddleware(wurk, running, deadlines, recent), events={"startup": start_watcher}
    )


FEATURE = Feature(
    "cancel",
    plug,
    # Inside what records a job's outcome (status, unique, batches, Celery's REVOKED), which
    # see ``Cancelled`` pass, and inside expiring (a job both expired and cancelled is skipped
    # as expired, as it would have been); outside timeouts (no limit starts for a job that
    # does not run) and encryption (its argument is never opened for it).
    server_place=Place(
        inside=("status", "unique", "batches", "celery_revoked", "expiring"),
        outside=("timeouts", "encryption"),
    ),
    settings=CancelSettings,
)

__all__ = [
    "FEATURE",
    "CancelError",
    "CancelSettings",
    "Cancelled",
    "CurrentJob",
    "cancel",
    "current_job",
]
