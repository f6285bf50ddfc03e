"""Where an iterable job got to: the ``it-<jid>`` hash, in Sidekiq 7.3's layout.

Fields: ``c`` the cursor (JSON), ``ex`` how many times the job has started, ``rt`` the
seconds it has run in all, and ``cancelled`` (written once, with HSETNX, as the epoch
seconds of the first cancel) when someone cancelled the job. The hash lives ``STATE_TTL``
after its last write (a job that is never run again must not leave it forever) and is
deleted when the job completes or is cancelled.

Ruby's ``cancel!`` and ours write the same field, and both sides read it the same way: the
field being there is the cancel, whatever it holds (Ruby tests the value for truth, and
every string is true in Ruby), so junk in it cancels the job rather than failing it. It is
read together with each save of the state, in the same transaction, as Sidekiq does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from django_wurk.core import keys, wire
from django_wurk.core.connection import Redis

#: Thirty days, as Sidekiq keeps it: longer than any retry schedule leaves a job waiting.
STATE_TTL = keys.ITERATION_STATE_TTL

#: The field a cancel writes (Sidekiq 7.3's ``cancel!``): epoch seconds as a decimal integer.
#: The same flag ``django_wurk.cancel`` writes for every job (``core/features/cancel/flag.py``).
CANCELLED = keys.CANCELLED_FIELD


def state_key(jid: str) -> str:
    return keys.iteration_state(jid)


class UnreadableIterationState(RuntimeError):
    """The ``it-<jid>`` key holds something we cannot resume from.

    The job fails with this (so it retries, then lands in the dead set with the reason)
    rather than starting over, which would repeat every item already done. Deleting the key
    lets it start from the beginning on purpose.
    """


@dataclass
class Saved:
    cursor: Any = None
    executions: int = 0
    runtime: float = 0.0


def cancelled_since(value: bytes | None) -> int:
    """The epoch seconds a ``cancelled`` field holds; 0 for a value that is not one (still a
    cancel: see the module's docstring)."""
    text = (value or b"").strip()
    return int(text) if text.isdigit() and len(text) <= 20 else 0


class IterationState:
    def __init__(self, redis: Redis, jid: str) -> None:
        self.redis = redis
        self.key = state_key(jid)

    def load(self) -> Saved:
        try:
            fields = self.redis.hgetall(self.key)
        except ResponseError as exc:  # WRONGTYPE: another program's value under our name
            raise self._not_a_hash(exc) from None
        if not fields:
            return Saved()
        try:
            cursor = wire.decode_json(fields[b"c"], "cursor") if b"c" in fields else None
            executions = int(fields.get(b"ex", b"0"))
            runtime = float(fields.get(b"rt", b"0"))
        except (wire.PayloadError, ValueError) as exc:
            raise UnreadableIterationState(
                f"{self.key} holds an unreadable cursor or count ({exc}); delete it to start over"
            ) from None
        return Saved(cursor, executions, runtime)

    def save(self, saved: Saved) -> bool:
        """Write ``saved``; whether the job is cancelled, read in the same transaction."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(
            self.key,
            mapping={"c": wire.dumps(saved.cursor), "ex": saved.executions, "rt": repr(saved.runtime)},
        )
        pipe.expire(self.key, STATE_TTL)
        pipe.hget(self.key, CANCELLED)
        try:
            replies = pipe.execute()
        except ResponseError as exc:  # the key became another type while the job ran
            raise self._not_a_hash(exc) from None
        return replies[2] is not None

    def cancelled(self) -> bool:
        """Whether the job is cancelled: its ``cancelled`` field is there, whatever it holds.

        A key that is not a hash is not a cancel: the next save or load says what it is."""
        try:
            return bool(self.redis.hexists(self.key, CANCELLED))
        except ResponseError:
            return False

    def cancel(self, now: float | None = None) -> int:
        """Mark the job cancelled, as Sidekiq's ``cancel!`` does; the epoch seconds of the
        first cancel (an earlier one is kept: HSETNX), 0 if the field holds something else.

        The hash gets ``STATE_TTL`` so that a job waiting in the retry set for days still
        finds its cancel when it runs. A job that never ran gets the cursor ``null`` (the
        first run's) as well: Ruby Sidekiq 7.3/8.0 fail a job whose hash has a ``cancelled``
        but no ``c`` (they JSON-parse the missing cursor), so a Ruby ``cancel!`` of a job not
        yet started makes it fail and retry, while ours cancels it on either side."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hsetnx(self.key, "c", "null")
        pipe.hsetnx(self.key, CANCELLED, int(time.time() if now is None else now))
        pipe.hget(self.key, CANCELLED)
        pipe.expire(self.key, STATE_TTL)
        try:
            _, _, value, _ = pipe.execute()
        except ResponseError as exc:
            raise self._not_a_hash(exc) from None
        return cancelled_since(value)

    def clear(self) -> None:
        self.redis.unlink(self.key)

    def _not_a_hash(self, exc: ResponseError) -> UnreadableIterationState:
        return UnreadableIterationState(f"{self.key} is not a hash ({exc}); delete it to start over")
