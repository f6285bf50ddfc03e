"""Expiring jobs (Sidekiq Pro's): a job that has not started by its deadline is skipped.

See ``docs/expiring.md``. ``FEATURE`` reads the ``expires_in`` job option (checked at
``set()`` and at class definition) and plugs in the client and server middleware.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.expiring.middleware import (
    ExpiryClientMiddleware,
    ExpiryServerMiddleware,
    plug,
)
from django_wurk.core.features.expiring.option import EXPIRES_AT, EXPIRES_IN, check_expires_in

FEATURE = Feature(
    "expiring",
    plug,
    # The client's stamps expires_at from a push's ``at``, before batches take the push.
    client_place=Place(outside=("batches",)),
    # A skipped job never runs: status never calls it "running", a timeout never starts.
    server_place=Place(outside=("status", "timeouts")),
    job_options={EXPIRES_IN: check_expires_in},
)

__all__ = ["EXPIRES_AT", "EXPIRES_IN", "FEATURE", "ExpiryClientMiddleware", "ExpiryServerMiddleware"]
