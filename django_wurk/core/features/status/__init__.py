"""Job status: ``@job(track=True)`` keeps a job's state, progress and result by jid.

See ``docs/status.md``. ``FEATURE`` reads the ``track`` job option and plugs in a gate, the
server middleware, an error and a death handler.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.status.middleware import plug
from django_wurk.core.features.status.record import STATES, TRACK, check_track, status_key
from django_wurk.core.features.status.reporter import StatusReporter, current_status
from django_wurk.core.features.status.settings import StatusSettings
from django_wurk.core.features.status.status import JobStatus

FEATURE = Feature(
    "status",
    plug,
    # "running" is written once the middleware outside let the job in; the return value is
    # caught on the job itself. Its gate runs after unique's: a dropped push is never "enqueued".
    server_place=Place(inside=("unique",), outside=("timeouts",)),
    job_options={TRACK: check_track},
    settings=StatusSettings,
)

__all__ = [
    "FEATURE",
    "STATES",
    "TRACK",
    "JobStatus",
    "StatusReporter",
    "StatusSettings",
    "current_status",
    "status_key",
]
