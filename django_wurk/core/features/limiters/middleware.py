"""What happens to a job that raises ``OverLimit``: rescheduled, not failed (Sidekiq Enterprise).

The server middleware catches ``OverLimit`` (and the classes given to
``configure(errors=...)``) out of a job and, instead of a failure (no retry count, no
error handlers, no failed stat), pushes the job back into the schedule set, with
``overrated`` (how many times it was rate limited) one higher, to run again after the
back-off: by default ``300 * overrated + rand(300) + 1`` seconds (5 to 10 minutes, then 10
to 15...). The fetched copy is acknowledged as the job returns. After ``reschedule`` times
(default 20, per limiter or ``configure``) the job dies instead: the dead set, with
``rate_limited: <limiter name>`` as its error message, and the death handlers told (a
batch counts it dead, a unique job releases its lock). ``reschedule=0`` lets ``OverLimit``
fail the job like any exception (retries and all). If the reschedule cannot be written
(Redis fails), the error propagates and the job fails and retries like any other: it is
never lost. A rescheduled job returned, so the worker counts it as processed, as Sidekiq's
does.

It must be the first middleware in the chain (``install`` prepends it, and the package
installs limiters after the other features), so that the middleware inside it see the
exception, not a return: the batch middleware must not count a rescheduled job as a
success, nor the unique middleware release its lock.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_wurk.core import keys, wire
from django_wurk.core.client import writes_to_redis
from django_wurk.core.dead_set import bury
from django_wurk.core.feature import Plug
from django_wurk.core.features.limiters.base import Limiter, OverLimit, defaults
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.limiter")

#: The payload key counting how many times the job was rate limited (Sidekiq Enterprise's).
OVERRATED = "overrated"
#: A rescheduled job never waits longer than this (a custom back-off's nonsense is capped).
MAX_BACKOFF = 30 * 86_400.0


def default_backoff(limiter: Limiter | None, payload: Payload, exc: BaseException) -> float:
    """Sidekiq Enterprise's: ``300 * overrated + rand(300) + 1`` seconds (``overrated`` is
    already counting this time)."""
    return 300 * overrated(payload) + random.randrange(300) + 1


def overrated(payload: Payload) -> int:
    """The payload's ``overrated``; anything but a whole number >= 0 reads as 0."""
    value = payload.get(OVERRATED)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class LimiterServerMiddleware:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        fetched = dict(payload)  # what to reschedule, whatever the job does to its payload's keys
        try:
            call_next()
        except (OverLimit, *defaults.errors) as exc:  # type: ignore[misc]
            limiter = exc.limiter if isinstance(exc, OverLimit) else None
            self.rate_limited(fetched, queue, limiter, exc)

    def rate_limited(self, payload: Payload, queue: str, limiter: Limiter | None, exc: BaseException) -> None:
        cap = defaults.reschedule
        if limiter is not None and limiter.reschedule is not None:
            cap = limiter.reschedule
        if cap == 0 or not writes_to_redis(self.wurk):
            raise exc  # a failure like any other (the testing modes keep no schedule either)
        before = overrated(payload)
        payload[OVERRATED] = before + 1
        name = limiter.name if limiter is not None else type(exc).__name__
        jid, job_class = payload.get("jid"), wire.job_display_class(payload)
        if before >= cap:
            now = wire.now_stamp(self.wurk.config.timestamps)
            payload.update(
                error_message=f"rate_limited: {name}",
                error_class=wire.error_class(exc),
                failed_at=payload.get("failed_at", now),
            )
            bury(self.wurk, wire.dumps(payload))
            logger.warning(
                "job %s (%s) rate limited by %r %d times: moved to the dead set",
                jid,
                job_class,
                name,
                before + 1,
            )
            self.wurk.report_death(payload, exc)
            return
        delay = self._backoff(limiter, payload, exc)
        self.wurk.redis.zadd(keys.SCHEDULE, {wire.dumps(payload): time.time() + delay})
        logger.info(
            "job %s (%s) rate limited by %r (%d of %d): runs again in %.0f s",
            jid, job_class, name, before + 1, cap, delay,
        )  # fmt: skip

    def _backoff(self, limiter: Limiter | None, payload: Payload, exc: BaseException) -> float:
        chosen: Any = (
            (limiter.backoff if limiter is not None else None) or defaults.backoff or default_backoff
        )
        try:
            delay = chosen(limiter, payload, exc)
        except Exception:
            logger.exception("limiter back-off %r raised; using the default", chosen)
            delay = None
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            if chosen is not default_backoff and delay is not None:
                logger.warning(
                    "limiter back-off %r returned %r, not seconds; using the default", chosen, delay
                )
            delay = default_backoff(limiter, payload, exc)
        return float(min(delay, MAX_BACKOFF))


def plug(wurk: Wurk) -> Plug:
    """What limiters plug into ``wurk``: the server middleware that reschedules a rate-limited job."""
    return Plug(server=LimiterServerMiddleware(wurk))
