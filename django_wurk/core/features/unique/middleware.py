"""How unique jobs plug into the engine: a push gate, server middleware, a death handler.

* Push gate (``lock.UniqueGate``): takes the lock when a new job is written to Redis, and
  drops a duplicate. A gate rather than client middleware, so a push that waits for a
  transaction's commit (or sits in the outbox) takes its lock at the commit, not before.
* Server middleware: ``unique_until="start"`` releases the lock just before the job runs;
  ``"success"`` (the default) after it returned (or was skipped as expired: it is done with
  either way), or once it was cancelled. A job that raised keeps it while it waits in the
  retry set.
* Death handler: a job the worker let die (retries exhausted, ``retry: False``, a
  discard, a poison pill) releases its lock; a job killed by hand (the data API, the
  dashboard) keeps it until it expires, as in Sidekiq Enterprise.

A release is a compare-and-delete by jid, so a job whose lock expired and was taken by a
newer copy never releases the newer copy's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django_wurk.core.api import KilledByAPI
from django_wurk.core.client import writes_to_redis
from django_wurk.core.control import Cancelled
from django_wurk.core.feature import Plug
from django_wurk.core.features.unique.lock import UniqueGate, release
from django_wurk.core.features.unique.options import START, SUCCESS
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.unique")


def until(payload: Payload) -> str:
    """When the lock is released; a value that is neither is read as ``"success"`` (the lock
    held longer, never shorter than asked), with a warning."""
    value = payload.get("unique_until")
    if value is None or value == SUCCESS:
        return SUCCESS
    if value == START:
        return START
    logger.warning(
        "job %s: unique_until %r is neither %r nor %r; releasing its lock on success",
        payload.get("jid"),
        value,
        START,
        SUCCESS,
    )
    return SUCCESS


class UniqueServerMiddleware:
    #: A job with neither key skips this middleware (see ``Chain.invoke``).
    payload_keys = ("unique_token", "unique_for")

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        if ("unique_token" not in payload and not payload.get("unique_for")) or not writes_to_redis(
            self.wurk
        ):
            call_next()
            return
        if until(payload) == START:
            release(self.wurk, payload, "before it ran")
            call_next()
            return
        try:
            call_next()
        except Cancelled:
            release(self.wurk, payload, "when it was cancelled")  # done with: it never runs again
            raise
        release(self.wurk, payload, "after it succeeded")


class UniqueDeathHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payload: Payload, exc: BaseException) -> None:
        if isinstance(exc, KilledByAPI):
            return  # killed by hand: the lock stays until it expires (Sidekiq Enterprise's rule)
        if not isinstance(payload, dict) or not writes_to_redis(self.wurk):
            return
        if "unique_token" in payload or payload.get("unique_for"):
            release(self.wurk, payload, "when it died")


def plug(wurk: Wurk) -> Plug:
    """What unique jobs plug into ``wurk``: the gate that takes the lock, the server
    middleware that releases it, and a death handler that releases a dead job's."""
    return Plug(gate=UniqueGate(wurk), server=UniqueServerMiddleware(wurk), on_death=UniqueDeathHandler(wurk))
