"""django-wurk: background jobs for Django on Sidekiq's Redis wire format.

What you may import from here is the public API; everything else may change.
"""

from django_wurk import delivery as _delivery  # noqa: F401 - declares set(using=..., on_commit=...)
from django_wurk.core.client import ClientBufferFull, EnqueueError
from django_wurk.core.config import Config, ConfigError, QueueSpec
from django_wurk.core.engine import UnknownJobError, Wurk, wurk
from django_wurk.core.job import Job, JobFunction, Setter, job
from django_wurk.core.version import __version__
from django_wurk.core.wire import TimestampStyle

__all__ = [
    "ClientBufferFull",
    "Config",
    "ConfigError",
    "EnqueueError",
    "Job",
    "JobFunction",
    "QueueSpec",
    "Setter",
    "TimestampStyle",
    "UnknownJobError",
    "Wurk",
    "__version__",
    "job",
    "wurk",
]
