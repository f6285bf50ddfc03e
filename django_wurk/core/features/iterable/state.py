"""Where an iterable job got to: the ``it-<jid>`` hash, in Sidekiq 7.3's layout.

Fields: ``c`` the cursor (JSON), ``ex`` how many times the job has started, ``rt`` the
seconds it has run in all. The hash lives ``STATE_TTL`` after its last write (a job that is
never run again must not leave it forever) and is deleted when the job completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.connection import Redis

#: Thirty days, as Sidekiq keeps it: longer than any retry schedule leaves a job waiting.
STATE_TTL = 30 * 24 * 3600


def state_key(jid: str) -> str:
    return f"it-{jid}"


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


class IterationState:
    def __init__(self, redis: Redis, jid: str) -> None:
        self.redis = redis
        self.key = state_key(jid)

    def load(self) -> Saved:
        try:
            fields = self.redis.hgetall(self.key)
        except ResponseError as exc:  # WRONGTYPE: another program's value under our name
            raise UnreadableIterationState(
                f"{self.key} is not a hash ({exc}); delete it to start over"
            ) from None
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

    def save(self, saved: Saved) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(
            self.key,
            mapping={"c": wire.dumps(saved.cursor), "ex": saved.executions, "rt": repr(saved.runtime)},
        )
        pipe.expire(self.key, STATE_TTL)
        pipe.execute()

    def clear(self) -> None:
        self.redis.unlink(self.key)
