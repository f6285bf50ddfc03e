"""The cancel flag: the ``cancelled`` field of ``it-<jid>``, written and read only here.

One flag for every job, iterable or not, and the very field Sidekiq 7.3's
``Iterable#cancel!`` writes (``HSETNX it-<jid> cancelled <epoch seconds>``, then a TTL of a
month on the hash): a Ruby ``cancel!`` stops our job and ours stops a Ruby iterable job.
Iterable jobs (``core/features/iterable``) read the same field in their loop through
``is_set``.

A key that holds something else than a hash (``WRONGTYPE``: another program's value under
the name) cannot carry the flag: reading it says "not cancelled", writing it raises
``CancelError`` naming the key, so a cancel that cannot be recorded is never reported as done.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ResponseError

from django_wurk.core import keys

logger = logging.getLogger("django_wurk.cancel")


class CancelError(RuntimeError):
    """A cancel flag could not be written (the key holds another type)."""


def key(jid: str) -> bytes:
    """``it-<jid>`` as bytes: a jid read from a payload may hold a lone surrogate (a ``\\ud800``
    escape), which UTF-8 cannot encode strictly; the reader and the writer encode it alike."""
    return keys.iteration_state(jid).encode("utf-8", "surrogatepass")


def set_flag(redis: Any, jid: str) -> bool:
    """Mark ``jid`` cancelled (the first cancel's time is kept) and stamp the hash's TTL;
    returns whether it had already ended cancelled before (``ended``), read in the same step."""
    name = key(jid)
    pipe = redis.pipeline(transaction=True)
    pipe.hexists(name, keys.CANCEL_ENDED_FIELD)
    # A cursor for a job that never ran (kept if it has one): Ruby Sidekiq 7.3/8.0 fail an
    # iterable job whose hash holds ``cancelled`` but no ``c`` (they parse the missing cursor
    # as JSON) instead of cancelling it. Only iterable jobs read ``c``.
    pipe.hsetnx(name, keys.ITERATION_CURSOR_FIELD, "null")
    now = time.time()
    pipe.hsetnx(name, keys.CANCELLED_FIELD, int(now))
    pipe.expire(name, keys.ITERATION_STATE_TTL)
    try:
        ended = bool(pipe.execute()[0])
    except ResponseError as exc:
        raise CancelError(
            f"cannot mark job {jid!r} cancelled: {keys.iteration_state(jid)!r} is not a hash ({exc})"
        ) from None
    # Told to every worker process (``Recent``), which checks a job's start against it; a
    # second round trip, so that a hash of the wrong type leaves the workers untold.
    tell = redis.pipeline(transaction=False)
    tell.zadd(keys.RECENT_CANCELS, {jid.encode("utf-8", "surrogatepass"): now})
    tell.zremrangebyscore(keys.RECENT_CANCELS, "-inf", now - keys.RECENT_CANCELS_KEPT)
    try:
        tell.execute()
    except ResponseError as exc:
        raise CancelError(
            f"cannot tell the workers job {jid!r} is cancelled: {keys.RECENT_CANCELS!r} is not a sorted "
            f"set ({exc}); its flag is set, so it stops once it runs"
        ) from None
    return ended


class Recent:
    """The jids cancelled lately, as this process last read them from ``RECENT_CANCELS``.

    A job's start checks this set (no round trip) rather than the job's flag: a flag check
    per job cost a round trip per job, four times a no-op job's whole cost. What it gives up:
    a job fetched before its cancel and started within ``LOOK_EVERY`` of it starts, and is
    then a running job cancelled (``current_job().cancelled`` at once, stopped after the
    grace); a recovered job (from a dead process's list) still reads its flag at its start.
    """

    def __init__(self) -> None:
        self._jids: dict[str, float] = {}
        self._since = 0.0
        self._lock = threading.Lock()

    def __contains__(self, jid: object) -> bool:
        return jid in self._jids

    def refresh(self, redis: Any) -> None:
        """Read the cancels since the last read (one round trip); forget those past the window."""
        found = redis.zrangebyscore(keys.RECENT_CANCELS, self._since, "+inf", withscores=True)
        now = time.time()
        with self._lock:
            jids = dict(self._jids)
            for member, score in found:
                try:
                    jid = (
                        member.decode("utf-8", "surrogatepass") if isinstance(member, bytes) else str(member)
                    )
                    at = float(score)
                except (UnicodeDecodeError, ValueError, TypeError):
                    continue  # not a jid any cancel wrote: nothing can start under it
                jids[jid] = at
                self._since = max(self._since, at)
            self._jids = {j: at for j, at in jids.items() if at > now - keys.RECENT_CANCELS_KEPT}


def is_set(redis: Any, jid: str) -> bool:
    """Whether ``jid`` is cancelled: one round trip (``HEXISTS``) on a redis-py client."""
    return read(redis.execute_command, jid)


def read(call: Callable[..., Any], jid: str) -> bool:
    """``is_set`` through ``call(*command)``: a thread's own ``Line.call`` on a job's start,
    which sends one command and reads its reply with none of a client's pool and locks."""
    try:
        return bool(call("HEXISTS", key(jid), keys.CANCELLED_FIELD))
    except ResponseError as exc:
        logger.warning("job %r: its cancel flag cannot be read (%s); taken as not cancelled", jid, exc)
        return False


def which_set(redis: Any, jids: Sequence[str]) -> list[bool]:
    """``is_set`` for each of ``jids`` in one round trip (the watcher's look at running jobs)."""
    if not jids:
        return []
    pipe = redis.pipeline(transaction=False)
    for jid in jids:
        pipe.hexists(key(jid), keys.CANCELLED_FIELD)
    replies = pipe.execute(raise_on_error=False)
    return [reply is True or reply == 1 for reply in replies]


def ended(redis: Any, jid: str) -> bool:
    """Whether a worker already ended ``jid`` cancelled (``count`` marked it)."""
    try:
        return bool(redis.hexists(key(jid), keys.CANCEL_ENDED_FIELD))
    except ResponseError:
        return False


def count(redis: Any, jid: str | None = None) -> None:
    """Count one cancelled job in ``stat:cancelled`` and its daily twin, and mark ``jid`` as
    ended cancelled (``ended``); never raises."""
    day = keys.daily_stat("cancelled", time.strftime("%Y-%m-%d", time.gmtime()))
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.incrby(keys.STAT_CANCELLED, 1)
        pipe.incrby(day, 1)
        pipe.expire(day, keys.DAILY_STAT_TTL)
        if jid:
            pipe.hset(key(jid), keys.CANCEL_ENDED_FIELD, int(time.time()))
            pipe.expire(key(jid), keys.ITERATION_STATE_TTL)
        pipe.execute(raise_on_error=False)
    except Exception as exc:  # a count is a report, never part of the job's outcome
        logger.warning("could not count a cancelled job in %s: %s", keys.STAT_CANCELLED, exc)
