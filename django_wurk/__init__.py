"""django-wurk: background jobs for Django on Sidekiq's Redis wire format.

The public API is what this module and the modules named in docs/api.md export in their
``__all__``: ``django_wurk.api`` (the data API), ``testing``, ``signals``, ``tasks``
(the ``django.tasks`` backend), ``admin`` and ``models`` (the dashboard on another admin
site) and the pytest plugin's fixtures. Everything else, ``django_wurk.core`` (the engine)
above all, may change in any release.
"""

from django_wurk import delivery as _delivery
from django_wurk.core.client import ClientBufferFull, EnqueueError, ShardMismatch
from django_wurk.core.config import Config, ConfigError, QueueSpec, UnknownShard
from django_wurk.core.engine import UnknownJobError, Wurk, wurk
from django_wurk.core.features import DEFAULT as _DEFAULT
from django_wurk.core.features.batches import Batch, BatchCallback, BatchStatus
from django_wurk.core.features.cancel import CancelError, CurrentJob, cancel, current_job
from django_wurk.core.features.encryption import EncryptionError
from django_wurk.core.features.status import current_status
from django_wurk.core.features.timeouts import SoftTimedOut, TimedOut
from django_wurk.core.job import Job, JobFunction, Setter, job
from django_wurk.core.version import __version__
from django_wurk.core.wire import TimestampStyle


def _config_before_ready() -> Config:
    """Until the app is ready: an error saying what is missing (see ``django_wurk.apps``).

    Imported when called, so that ``import django_wurk`` needs no Django settings."""
    from django_wurk.apps import config_before_ready

    return config_before_ready()


# The process's engine: every built-in feature, and this app's delivery options (``using``,
# ``on_commit``), before any job class is defined. The one place it is composed; runwurk and
# the app's ``ready()`` add what settings turn on, with ``wurk.use``.
wurk.use(*_DEFAULT, _delivery.FEATURE)
wurk.set_config_loader(_config_before_ready)

__all__ = [
    "Batch",
    "BatchCallback",
    "BatchStatus",
    "CancelError",
    "ClientBufferFull",
    "Config",
    "ConfigError",
    "CurrentJob",
    "EncryptionError",
    "EnqueueError",
    "Job",
    "JobFunction",
    "QueueSpec",
    "Setter",
    "ShardMismatch",
    "SoftTimedOut",
    "TimedOut",
    "TimestampStyle",
    "UnknownJobError",
    "UnknownShard",
    "Wurk",
    "__version__",
    "cancel",
    "current_job",
    "current_status",
    "job",
    "wurk",
]
