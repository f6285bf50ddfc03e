"""Unique jobs (Sidekiq Enterprise's): ``@job(unique_for=600)`` and ``.set(unique_for=...)``.

While a job's lock is held, pushing the same job again (same class, queue and arguments)
pushes nothing and returns ``None``. See ``docs/unique.md``. ``FEATURE`` reads the
``unique_for`` and ``unique_until`` options and plugs in a gate, the server middleware and a
death handler.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.unique.lock import UniqueGate, digest, lock_owner
from django_wurk.core.features.unique.middleware import UniqueDeathHandler, UniqueServerMiddleware, plug
from django_wurk.core.features.unique.options import OPTIONS

FEATURE = Feature(
    "unique",
    plug,
    # Outside the middleware that may end a job without running it (an expired job): such a
    # job returned as a success and is done with, so it releases its lock; one that raises keeps it.
    # Inside batches (their place says so): the lock is gone before a batch callback is pushed.
    server_place=Place(outside=("expiring",)),
    job_options=OPTIONS,
)

__all__ = [
    "FEATURE",
    "UniqueDeathHandler",
    "UniqueGate",
    "UniqueServerMiddleware",
    "digest",
    "lock_owner",
]
