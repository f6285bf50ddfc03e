"""Job status: ``@job(track=True)`` keeps a job's state, progress and result by jid.

See ``docs/status.md``. Importing this package declares the ``track`` job option and plugs
the feature into the global engine; ``install(wurk)`` does the same for another ``Wurk``.
"""

from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.status.middleware import install
from django_wurk.core.features.status.record import STATES, TRACK, check_track, status_key
from django_wurk.core.features.status.reporter import StatusReporter, current_status
from django_wurk.core.features.status.status import JobStatus
from django_wurk.core.job import declare_job_option

declare_job_option(TRACK, check_track)
install(_wurk)

__all__ = ["STATES", "TRACK", "JobStatus", "StatusReporter", "current_status", "install", "status_key"]
