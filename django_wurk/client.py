"""The client: turn payloads into Redis entries.

A push runs the client middleware chain, then hands the surviving payloads to the
engine's pusher. The default pusher writes Sidekiq's exact commands (``SADD queues`` +
``LPUSH queue:<q>`` in one pipeline, or ``ZADD schedule``); testing modes swap the pusher
for one that records or runs jobs instead, so the rest of the client is identical in
tests and in production.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from django_wurk import keys, wire
from django_wurk.wire import Payload

if TYPE_CHECKING:
    from django_wurk.engine import Wurk


#: Options a caller gives for one push that say how to deliver it, not what the job is:
#: consumed by the client and never stored (Sidekiq 8 treats ``pool`` and ``sync`` so).
#: The Django app reads ``using`` (database alias) and ``on_commit`` (bool).
Delivery = Mapping[str, Any]
NO_DELIVERY: Delivery = {}


class Pusher(Protocol):
    def push(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY
    ) -> None: ...


class RedisPusher:
    """Writes payloads to Redis the way Sidekiq's client does."""

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        if not payloads:
            return
        style = self.wurk.config.timestamps
        pipe = self.wurk.redis.pipeline(transaction=False)
        if at is None:
            # One enqueued_at for the whole group, as Sidekiq stamps a bulk push.
            stamp = wire.now_stamp(style)
            by_queue: dict[str, list[str]] = {}
            for payload in payloads:
                payload["enqueued_at"] = stamp
                by_queue.setdefault(payload["queue"], []).append(wire.dumps(payload))
            for queue, entries in by_queue.items():
                pipe.sadd(keys.QUEUES, queue)
                pipe.lpush(keys.queue(queue), *entries)
        else:
            entries_at: dict[str | bytes, float] = {}
            for payload in payloads:
                payload.pop("enqueued_at", None)
                entries_at[wire.dumps(payload)] = at
            pipe.zadd(keys.SCHEDULE, entries_at)
        pipe.execute()


def push_once(wurk: Wurk, marker: str, payload: Payload, at: float | None) -> bool:
    """Push ``payload`` unless ``marker`` shows it was pushed before; True if this call pushed.

    The outbox relay's step: atomic with the marker, so retries after a crash never
    duplicate a job. ``enqueued_at`` is stamped now (or dropped for a scheduled push).
    """
    payload = dict(payload)
    if at is None:
        payload["enqueued_at"] = wire.now_stamp(wurk.config.timestamps)
    else:
        payload.pop("enqueued_at", None)
    queue = str(payload.get("queue") or "default")
    return bool(
        wurk.scripts.push_once(
            keys=[marker, keys.QUEUES, keys.queue(queue), keys.SCHEDULE],
            args=[keys.OUTBOX_MARKER_TTL, queue, wire.dumps(payload), "" if at is None else repr(at)],
        )
    )


class Client:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def prepare(self, payload: Payload) -> Payload | None:
        """Give the payload its jid and creation time, then run the client middleware."""
        payload = dict(payload)
        if not payload.get("jid"):
            payload["jid"] = wire.new_jid()
        if "created_at" not in payload:
            payload["created_at"] = wire.now_stamp(self.wurk.config.timestamps)
        result: Payload | None = self.wurk.client_middleware.invoke(
            lambda: payload, payload["class"], payload, payload["queue"]
        )
        return result

    def push(self, payload: Payload, at: float | None = None, delivery: Delivery = NO_DELIVERY) -> str | None:
        """Push one job now (``at`` None) or into the schedule; ``None`` if middleware dropped it."""
        prepared = self.prepare(payload)
        if prepared is None:
            return None
        self.wurk.pusher.push([prepared], at, delivery)
        jid: str = prepared["jid"]
        return jid

    def promote(self, key: str, member: bytes, payload: Payload) -> bool:
        """Move one sorted-set entry onto its queue atomically, as a normal push.

        The payload gets a fresh ``enqueued_at`` and passes the client middleware; then one
        Lua script removes ``member`` from ``key`` and pushes the result, so the entry is
        never lost between the two steps and, if two callers race, only one pushes it.
        Returns False when the entry was already gone (or middleware dropped the push).
        """
        payload = dict(payload)
        payload["enqueued_at"] = wire.now_stamp(self.wurk.config.timestamps)
        prepared = self.prepare(payload)
        queue = str((prepared or payload).get("queue") or "default")
        body = wire.dumps(prepared) if prepared is not None else ""
        moved = self.wurk.scripts.promote(
            keys=[key, keys.QUEUES, keys.queue(queue)], args=[member, queue, body]
        )
        return bool(moved) and prepared is not None

    def push_bulk(
        self,
        payloads: Sequence[Payload],
        at: float | None = None,
        batch_size: int = 1000,
        delivery: Delivery = NO_DELIVERY,
    ) -> list[str | None]:
        """Push many jobs, one pipeline per ``batch_size`` slice; jids in input order."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        jids: list[str | None] = []
        for start in range(0, len(payloads), batch_size):
            ready: list[Payload] = []
            for payload in payloads[start : start + batch_size]:
                prepared = self.prepare(payload)
                jids.append(prepared["jid"] if prepared is not None else None)
                if prepared is not None:
                    ready.append(prepared)
            self.wurk.pusher.push(ready, at, delivery)
        return jids
