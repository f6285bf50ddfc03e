"""Batches (Sidekiq Pro's): a group of jobs, with callbacks when all of them have run.

See ``docs/batches.md``. ``FEATURE`` is what batches plug into an engine: client and
server middleware, an error handler and a death handler.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.batches.batch import (
    AUTO,
    Batch,
    BatchClosed,
    BatchError,
    NoSuchBatch,
)
from django_wurk.core.features.batches.callbacks import BatchCallback, CallbackJob, UnknownBatchCallback
from django_wurk.core.features.batches.middleware import plug
from django_wurk.core.features.batches.settings import BatchSettings
from django_wurk.core.features.batches.status import BatchSet, BatchStatus, CallbackInfo, DeadBatchSet

FEATURE = Feature(
    "batches",
    plug,
    # A job's success is counted once every middleware inside let it finish: a job expiry
    # skipped, or one Celery revoked, is done with (and counted) as a success on its way out;
    # a unique job has released its lock, so a ``success`` callback may push it again (its
    # death handler, innermost first like every outcome handler, runs before ours too).
    server_place=Place(outside=("celery_revoked", "expiring", "unique")),
    settings=BatchSettings,
)

__all__ = [
    "AUTO",
    "FEATURE",
    "Batch",
    "BatchCallback",
    "BatchClosed",
    "BatchError",
    "BatchSet",
    "BatchSettings",
    "BatchStatus",
    "CallbackInfo",
    "CallbackJob",
    "DeadBatchSet",
    "NoSuchBatch",
    "UnknownBatchCallback",
]
