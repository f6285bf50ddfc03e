"""How expiring jobs plug into the engine: one client and one server middleware.

* Client middleware: a push whose payload has ``expires_in`` and no ``expires_at`` gets
  ``expires_at`` = its scheduled time (``at``), else now, + ``expires_in``. Stamped once:
  a retry or a scheduled job promoted later keeps the deadline it was given. A payload with
  ``deadline`` and no ``deadline_at`` gets ``deadline_at`` = now (the first push, whatever
  its scheduled time) + ``deadline``, or the absolute time it names; stamped once the same way.
* Server middleware: before every execution (a retry's too), a job whose ``expires_at``
  or ``deadline_at`` has passed on this worker's clock is skipped: never run, and, since it returns like a
  job that finished, acknowledged, counted as processed, and counted as a success by its
  batch (Sidekiq Pro's rule). ``stat:expired`` and its daily twin count it, and one log
  line says which job it was and how late.

It sits after the batches middleware in the chain (batches prepend theirs, this one is
appended), so a skipped batch job still reaches the batch's success count and never holds
the batch pending.
"""

from __future__ import annotations

import logging
import reprlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from django_wurk.core import keys, wire
from django_wurk.core.client import writes_to_redis
from django_wurk.core.feature import Plug
from django_wurk.core.features.expiring.option import (
    DEADLINE,
    DEADLINE_AT,
    EXPIRES_AT,
    EXPIRES_IN,
    absent,
    deadline,
    deadline_from,
    duration,
)
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.expiring")


def _shortener() -> Callable[[object], str]:
    """``repr`` that keeps a hostile value quoted in a log line short (a 100 KB string, a
    400-digit number: a few dozen characters)."""
    short = reprlib.Repr()
    short.maxstring = short.maxother = short.maxlong = 60
    short.maxlist = short.maxdict = 4
    short.maxlevel = 2
    return short.repr


_short = _shortener()


def _context(payload: Payload, queue: str) -> dict[str, Any]:
    return {"jid": payload.get("jid", ""), "job_class": wire.job_display_class(payload), "queue": queue}


class ExpiryClientMiddleware:
    #: Acts only on a payload with ``expires_in`` or ``deadline``, to which it adds
    #: ``expires_at`` or ``deadline_at``.
    client_keys = (EXPIRES_IN, DEADLINE)
    adds_keys = frozenset({EXPIRES_AT, DEADLINE_AT})

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(
        self, job_class: str, payload: Payload, queue: str, call_next: Callable[[], Payload | None]
    ) -> Payload | None:
        wanted = payload.get(EXPIRES_IN)
        if not absent(wanted) and absent(payload.get(EXPIRES_AT)):
            seconds = duration(wanted)
            if seconds is None:
                # Another producer's payload (a promotion): the push goes on, without a deadline.
                ctx = _context(payload, queue)
                logger.warning(
                    "job %r (%s, queue %r) has expires_in %s, not seconds > 0: it will not expire",
                    ctx["jid"], ctx["job_class"], queue, _short(wanted), extra=ctx,
                )  # fmt: skip
            else:
                origin = deadline(payload.get("at")) or time.time()
                payload[EXPIRES_AT] = float(origin + seconds)
        given = payload.get(DEADLINE)
        if not absent(given) and absent(payload.get(DEADLINE_AT)):
            # From the first push, not the scheduled time: the whole job's limit, which a
            # retry or a promotion (the stamp is there by then) never moves.
            limit = deadline_from(given, time.time())
            if limit is None:
                ctx = _context(payload, queue)
                logger.warning(
                    "job %r (%s, queue %r) has deadline %s, not seconds > 0 or a time: it has no deadline",
                    ctx["jid"], ctx["job_class"], queue, _short(given), extra=ctx,
                )  # fmt: skip
            else:
                payload[DEADLINE_AT] = limit
        return call_next()


class ExpiryServerMiddleware:
    #: A job without a deadline skips this middleware (see ``Chain.invoke``).
    payload_keys = (EXPIRES_AT, DEADLINE_AT)

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        now = time.time()
        for key, what in ((EXPIRES_AT, "expired"), (DEADLINE_AT, "passed its deadline")):
            limit = self._limit(payload, key, queue)
            if limit is not None and now > limit:
                ctx = _context(payload, queue)
                logger.info(
                    "job %r (%s, queue %r) %s %.3f sec ago: skipped without running",
                    ctx["jid"], ctx["job_class"], queue, what, now - limit, extra=ctx,
                )  # fmt: skip
                count_expired(self.wurk)
                return
        call_next()

    def _limit(self, payload: Payload, key: str, queue: str) -> float | None:
        """The payload's ``key`` as epoch seconds; None when absent or unreadable (logged:
        the job runs as one without that limit)."""
        value = payload.get(key)
        if absent(value):
            return None
        limit = deadline(value)
        if limit is None:
            ctx = _context(payload, queue)
            logger.warning(
                "job %r (%s, queue %r) has %s %s, not epoch seconds: running it as a job "
                "that does not expire",
                ctx["jid"], ctx["job_class"], queue, key, _short(value), extra=ctx,
            )  # fmt: skip
        return limit


def count_expired(wurk: Wurk) -> None:
    """Add one to ``stat:expired`` and today's ``stat:expired:YYYY-MM-DD`` (kept as long as
    Sidekiq keeps its daily stats).

    The job is already skipped whatever happens here: a Redis error loses this one count,
    logged, rather than failing (and so retrying) a job that must not run.
    """
    if not writes_to_redis(wurk):
        return
    daily = keys.daily_stat("expired", datetime.now(UTC).date().isoformat())
    try:
        wurk.lines.get().pipeline(
            [("INCRBY", keys.STAT_EXPIRED, 1), ("INCRBY", daily, 1), ("EXPIRE", daily, keys.DAILY_STAT_TTL)]
        )
    except (RedisError, OSError) as exc:
        logger.warning("could not count an expired job in %s: %s", keys.STAT_EXPIRED, exc)


def plug(wurk: Wurk) -> Plug:
    """What expiring jobs plug into ``wurk``: the client middleware stamps, the server one skips."""
    return Plug(client=ExpiryClientMiddleware(wurk), server=ExpiryServerMiddleware(wurk))
