"""django-wurk: background jobs for Django on Sidekiq's Redis wire format.

What you may import from here is the public API; everything else may change.
"""

from django_wurk.client import ClientBufferFull, EnqueueError
from django_wurk.config import Config, ConfigError, QueueSpec
from django_wurk.engine import UnknownJobError, Wurk, wurk
from django_wurk.job import Job, JobFunction, Setter, job
from django_wurk.wire import TimestampStyle

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
    "job",
    "wurk",
]
