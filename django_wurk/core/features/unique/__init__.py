"""Unique jobs (Sidekiq Enterprise's): ``@job(unique_for=600)`` and ``.set(unique_for=...)``.

While a job's lock is held, pushing the same job again (same class, queue and arguments)
pushes nothing and returns ``None``. See ``docs/unique.md``. Importing this package
declares the ``unique_for`` and ``unique_until`` options and plugs unique jobs into the
global engine; ``install(wurk)`` does the same for another ``Wurk``.
"""

from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.unique.lock import UniqueGate, digest, lock_owner
from django_wurk.core.features.unique.middleware import UniqueDeathHandler, UniqueServerMiddleware, install
from django_wurk.core.features.unique.options import declare

declare()
install(_wurk)

__all__ = [
    "UniqueDeathHandler",
    "UniqueGate",
    "UniqueServerMiddleware",
    "digest",
    "install",
    "lock_owner",
]
