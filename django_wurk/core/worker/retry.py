"""What happens when a job raises: retry later, bury in the dead set, or discard.

The rules are Sidekiq's (lib/sidekiq/job_retry.rb; docs/jobs.md), with Sidekiq 8's jitter. The handler
starts again from the exact payload that was fetched, not from the copy the job and
middleware may have changed, so a retry re-runs what was enqueued. Unknown payload keys
(Pro's ``bid``, Enterprise's ``unique_for``...) ride along untouched.

The fields it reads (``retry``, ``retry_count``, ``retry_for``, ``failed_at``,
``retry_queue``, ``backtrace``) may hold anything another producer wrote. A value of the
wrong type or out of range is treated as absent (or read as Ruby would, where Sidekiq
accepts it), so an odd field never stops a failure from being recorded.
"""

from __future__ import annotations

import logging
import random
import re
import time
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

from django_wurk.core import keys, priority, wire
from django_wurk.core.dead_set import bury
from django_wurk.core.engine import UnrunnableJob
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.retry")

#: A retry is never scheduled further ahead than this (about 100 years). A score must be a
#: finite float: an absurd ``retry_count`` or ``retry_in`` must not overflow it.
MAX_RETRY_DELAY = 100 * 365 * 86400.0

_LEADING_INTEGER = re.compile(r"\s*[+-]?\d+")


def default_delay(count: int) -> int:
    return count**4 + 15


def jitter(count: int) -> int:
    """Sidekiq 8: ``rand(10 * (count + 1))``, an integer in ``[0, 10(count+1))``.

    Ruby's ``rand`` takes a negative bound as its absolute value (a manual retry leaves
    ``retry_count`` at -1, and a payload may hold less), and ``rand(0)`` adds nothing here.
    """
    bound = abs(10 * (count + 1))
    return random.randrange(bound) if bound else 0


def backtrace_lines(tb: TracebackType | None, limit: int) -> list[str]:
    """Frames innermost first, as Ruby orders a backtrace, in Ruby's ``file:line:in `name'`` shape.

    A file name may hold undecodable bytes (as surrogate escapes); they are replaced, since
    the backtrace is written as UTF-8.
    """
    frames = traceback.extract_tb(tb)
    lines = [f"{f.filename}:{f.lineno}:in `{f.name}'" for f in reversed(frames)]
    return [line.encode("utf-8", "replace").decode("utf-8") for line in lines[:limit]]


def backtrace_limit(value: Any, most: int) -> int | None:
    """How many frames a payload's ``backtrace`` option asks for; None for no backtrace.

    ``true`` means all (up to ``most``), a number that many, a string its leading integer
    (Ruby's ``to_i``: ``"abc"`` is 0). Any other value (a list, an object) is treated as
    absent rather than stopping the retry.
    """
    if value is True:
        return most
    if not value or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return min(value, most)
    if isinstance(value, float):
        return min(int(value), most)
    if isinstance(value, str):
        match = _LEADING_INTEGER.match(value)
        return min(int(match.group()), most) if match else 0
    return None


def usable_count(value: Any) -> int | None:
    """``retry_count`` if it is an integer (negative too: a manual retry lowers it to -1)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class RetryHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def handle(self, raw: bytes, queue: str, job: Any, exc: BaseException) -> str:
        """Record the failure; returns what happened: retry, dead, discarded or dropped."""
        msg = wire.loads(raw)
        config = self.wurk.config
        style = config.timestamps
        # A payload that can never run goes to the dead set whatever its retry options say.
        unrunnable = isinstance(exc, UnrunnableJob)
        retry = msg.get("retry")
        if retry is None:
            defaults = getattr(type(job), "_defaults", None) if job is not None else None
            retry = defaults.get("retry", True) if defaults else True
        # Ruby truthiness: only false/nil turn retries off; 0 means "straight to the dead set".
        if retry is False and not unrunnable:
            self.wurk.report_death(msg, exc)
            return "dropped"

        retry_queue = msg.get("retry_queue")
        # ``queue`` is the list the job came from: a priority list names its queue (core/priority.py).
        msg["queue"] = (
            retry_queue if isinstance(retry_queue, str) and retry_queue else priority.split(queue)[0]
        )
        msg["error_message"] = wire.error_message(exc)
        msg["error_class"] = wire.error_class(exc)
        now = time.time()
        previous = usable_count(msg.get("retry_count"))
        if previous is not None:
            msg["retried_at"] = wire.now_stamp(style, now)
            msg["retry_count"] = count = previous + 1
        else:
            msg["failed_at"] = wire.now_stamp(style, now)
            msg["retry_count"] = count = 0

        limit = backtrace_limit(msg.get("backtrace"), config.backtrace_limit)
        if limit is not None:
            msg["error_backtrace"] = wire.encode_backtrace(backtrace_lines(exc.__traceback__, limit))

        requested = self._requested(job, exc)
        if requested is not None:
            self.wurk.redis.zadd(keys.RETRY, {wire.dumps(msg): now + min(requested, MAX_RETRY_DELAY)})
            self.wurk.report_retry(msg, exc)
            return "retry"

        max_retries = retry if isinstance(retry, int) and not isinstance(retry, bool) else config.max_retries
        retry_for = msg.get("retry_for")
        if unrunnable:
            bury(self.wurk, wire.dumps(msg))
            self.wurk.report_death(msg, exc)
            return "dead"
        if isinstance(retry_for, (int, float)) and not isinstance(retry_for, bool):
            failed_at = wire.read_stamp(msg.get("failed_at")) or now
            # Compared, not added: an int and a float compare exactly, whatever their size.
            exhausted = now - failed_at > retry_for
        else:
            exhausted = count >= max_retries

        if not exhausted:
            delay = self._delay(job, count, exc)
            if delay == "discard":
                return self._discard(msg, exc)
            if not isinstance(delay, str):
                score = now + min(delay + jitter(count), MAX_RETRY_DELAY)
                self.wurk.redis.zadd(keys.RETRY, {wire.dumps(msg): score})
                self.wurk.report_retry(msg, exc)
                return "retry"
        return self._exhausted(job, msg, exc)

    def _requested(self, job: Any, exc: BaseException) -> float | None:
        """The delay of a retry the job asked for itself (``Job.retry_requested``), if any."""
        hook = getattr(job, "retry_requested", None)
        if hook is None:
            return None
        try:
            value = hook(exc)
        except Exception:
            logger.exception("retry_requested of %s raised; treating it as a failure", type(job).__qualname__)
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            return max(float(value), 0.0)
        return None

    def _delay(self, job: Any, count: int, exc: BaseException) -> float | int | str:
        if job is not None:
            try:
                custom = job.retry_in(count, exc)
            except Exception:
                logger.exception("retry_in of %s raised; using the default delay", type(job).__qualname__)
                custom = None
            if custom in ("discard", "kill"):
                return str(custom)
            if isinstance(custom, (int, float)) and not isinstance(custom, bool) and custom > 0:
                return custom  # huge or infinite is capped by the caller
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
