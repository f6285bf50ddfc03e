"""Expiring jobs (Sidekiq Pro's): a job that has not started by its deadline is skipped.

See ``docs/expiring.md``. Importing this package declares the ``expires_in`` job option
(checked at ``set()`` and at class definition) and plugs the middleware into the global
engine; ``install(wurk)`` does the same for another ``Wurk``.
"""

from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.expiring.middleware import (
    ExpiryClientMiddleware,
    ExpiryServerMiddleware,
    install,
)
from django_wurk.core.features.expiring.option import EXPIRES_AT, EXPIRES_IN, check_expires_in
from django_wurk.core.job import declare_job_option

declare_job_option(EXPIRES_IN, check_expires_in)
install(_wurk)

__all__ = ["EXPIRES_AT", "EXPIRES_IN", "ExpiryClientMiddleware", "ExpiryServerMiddleware", "install"]
