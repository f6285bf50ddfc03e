"""Batches (Sidekiq Pro's): a group of jobs, with callbacks when all of them have run.

See ``docs/batches.md``. Importing this package plugs batches into the global engine
(client and server middleware, an error handler and a death handler); ``install(wurk)``
does the same for another ``Wurk``.
"""

from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.batches.batch import (
    AUTO,
    Batch,
    BatchClosed,
    BatchError,
    NoSuchBatch,
)
from django_wurk.core.features.batches.callbacks import BatchCallback, CallbackJob, UnknownBatchCallback
from django_wurk.core.features.batches.middleware import install
from django_wurk.core.features.batches.status import BatchSet, BatchStatus, CallbackInfo, DeadBatchSet

install(_wurk)

__all__ = [
    "AUTO",
    "Batch",
    "BatchCallback",
    "BatchClosed",
    "BatchError",
    "BatchSet",
    "BatchStatus",
    "CallbackInfo",
    "CallbackJob",
    "DeadBatchSet",
    "NoSuchBatch",
    "UnknownBatchCallback",
    "install",
]
