"""What happens when a job raises: retry later, bury in the dead set, or discard.

The rules are Sidekiq's (``sidekiq-wire.md`` §3), with Sidekiq 8's jitter. The handler
starts again from the exact payload that was fetched, not from the copy the job and
middleware may have changed, so a retry re-runs what was enqueued. Unknown payload keys
(Pro's ``bid``, Enterprise's ``unique_for``...) ride along untouched.
"""

from __future__ import annotations

import logging
import random
import time
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

from django_wurk.core import keys, wire
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.retry")


def default_delay(count: int) -> int:
    return count**4 + 15


def jitter(count: int) -> int:
    """Sidekiq 8: ``rand(10 * (count + 1))``, an integer in ``[0, 10(count+1))``."""
    return random.randrange(10 * (count + 1))


def backtrace_lines(tb: TracebackType | None, limit: int) -> list[str]:
    """Frames innermost first, as Ruby orders a backtrace, in Ruby's ``file:line:in `name'`` shape."""
    frames = traceback.extract_tb(tb)
    lines = [f"{f.filename}:{f.lineno}:in `{f.name}'" for f in reversed(frames)]
    return lines[:limit]


def bury(wurk: Wurk, payload: str | bytes, source: str | None = None, member: bytes | None = None) -> bool:
    """Add to the dead set with Sidekiq's trims; with ``source``, only if ``member`` was still there.

    ``payload`` may be the exact bytes read from Redis, so a kill moves an entry unchanged.
    """
    config = wurk.config
    now = time.time()
    script_keys = [keys.DEAD] if source is None else [keys.DEAD, source]
    args: list[Any] = [repr(now), payload, repr(now - config.dead_timeout), config.dead_max_jobs]
    if source is not None:
        args.append(member)
    return bool(wurk.scripts.bury(keys=script_keys, args=args))


class RetryHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def handle(self, raw: bytes, queue: str, job: Any, exc: BaseException) -> str:
        """Record the failure; returns what happened: retry, dead, discarded or dropped."""
        msg = wire.loads(raw)
        config = self.wurk.config
        style = config.timestamps
        retry = msg.get("retry")
        if retry is None:
            defaults = getattr(type(job), "_defaults", None) if job is not None else None
            retry = defaults.get("retry", True) if defaults else True
        # Ruby truthiness: only false/nil turn retries off; 0 means "straight to the dead set".
        if retry is False:
            self.wurk.report_death(msg, exc)
            return "dropped"

        msg["queue"] = msg.get("retry_queue") or queue
        msg["error_message"] = wire.error_message(exc)
        msg["error_class"] = wire.error_class(exc)
        now = time.time()
        if "retry_count" in msg and isinstance(msg["retry_count"], int):
            msg["retried_at"] = wire.now_stamp(style, now)
            msg["retry_count"] += 1
        else:
            msg["failed_at"] = wire.now_stamp(style, now)
            msg["retry_count"] = 0
        count: int = msg["retry_count"]

        backtrace = msg.get("backtrace")
        if backtrace:
            limit = (
                config.backtrace_limit if backtrace is True else min(int(backtrace), config.backtrace_limit)
            )
            msg["error_backtrace"] = wire.encode_backtrace(backtrace_lines(exc.__traceback__, limit))

        max_retries = retry if isinstance(retry, int) and not isinstance(retry, bool) else config.max_retries
        retry_for = msg.get("retry_for")
        if isinstance(retry_for, (int, float)) and not isinstance(retry_for, bool):
            failed_at = wire.read_stamp(msg.get("failed_at")) or now
            exhausted = failed_at + retry_for < now
        else:
            exhausted = count >= max_retries

        if not exhausted:
            delay = self._delay(job, count, exc)
            if delay == "discard":
                return self._discard(msg, exc)
            if not isinstance(delay, str):
                score = now + delay + jitter(count)
                self.wurk.redis.zadd(keys.RETRY, {wire.dumps(msg): score})
                return "retry"
        return self._exhausted(job, msg, exc)

    def _delay(self, job: Any, count: int, exc: BaseException) -> float | str:
        if job is not None:
            try:
                custom = job.retry_in(count, exc)
            except Exception:
                logger.exception("retry_in of %s raised; using the default delay", type(job).__qualname__)
                custom = None
            if custom in ("discard", "kill"):
                return str(custom)
            if isinstance(custom, (int, float)) and not isinstance(custom, bool) and custom > 0:
                return float(custom)
        return default_delay(count)

    def _exhausted(self, job: Any, msg: Payload, exc: BaseException) -> str:
        verdict = None
        if job is not None:
            try:
                verdict = job.retries_exhausted(msg, exc)
            except Exception:
                logger.exception("retries_exhausted of %s raised", type(job).__qualname__)
        if verdict == "discard" or msg.get("dead") is False:
            return self._discard(msg, exc)
        bury(self.wurk, wire.dumps(msg))
        self.wurk.report_death(msg, exc)
        return "dead"

    def _discard(self, msg: Payload, exc: BaseException) -> str:
        msg["discarded_at"] = wire.now_stamp(self.wurk.config.timestamps)
        self.wurk.report_death(msg, exc)
        return "discarded"
