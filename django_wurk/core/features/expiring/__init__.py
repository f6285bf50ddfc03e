"""Expiring jobs (Sidekiq Pro's): a job that has not started by its deadline is skipped.

Two limits, one rule: ``expires_in`` (Sidekiq Pro's, counted from the scheduled time) and
``deadline`` (seconds from the first push, or an absolute time: the whole job's, across its
retries). Past either, the job is not started again, and counts as expired.
See ``docs/expiring.md`` and ``docs/debounce.md``. ``FEATURE`` reads the ``expires_in`` job option (checked at
``set()`` and at class definition) and plugs in the client and server middleware.
"""

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.expiring.middleware import (
    ExpiryClientMiddleware,
    ExpiryServerMiddleware,
    plug,
)
from django_wurk.core.features.expiring.option import (
    DEADLINE,
    DEADLINE_AT,
    EXPIRES_AT,
    EXPIRES_IN,
    check_deadline,
    check_expires_in,
)

FEATURE = Feature(
    "expiring",
    plug,
    # The client's stamps expires_at from a push's ``at``, before batches take the push.
    client_place=Place(outside=("batches",)),
    # A skipped job never runs: status never calls it "running", a timeout never starts.
    server_place=Place(outside=("status", "timeouts")),
    job_options={EXPIRES_IN: check_expires_in, DEADLINE: check_deadline},
)

__all__ = [
    "DEADLINE",
    "DEADLINE_AT",
    "EXPIRES_AT",
    "EXPIRES_IN",
    "FEATURE",
    "ExpiryClientMiddleware",
    "ExpiryServerMiddleware",
]
