"""The poller: promote due jobs from the retry and schedule sets onto their queues.

Each due entry is read, given a fresh ``enqueued_at`` and passed through the client
middleware, then moved by one Lua script that removes it from the sorted set and pushes
it in the same atomic step. Two pollers racing for one entry cannot both push it (the
ZREM decides), and a crash between "remove" and "push" cannot happen, so promotion never
loses or duplicates a job. An entry that cannot be promoted (it cannot be decoded or
encoded again, or the client middleware raises on it) goes to the dead set as its exact
bytes with the reason, in one script that also removes it, so racing pollers bury it once;
the pass then goes on with the entries behind it.

The sleep between polls follows Sidekiq: the cluster-wide average interval scaled by the
number of processes, randomised so processes spread their polls out.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from django_wurk.core import keys, wire
from django_wurk.core.worker.fetch import UnitOfWork
from django_wurk.core.worker.loop import Loop
from django_wurk.core.worker.processor import invalid_payload_envelope
from django_wurk.core.worker.retry import bury

if TYPE_CHECKING:
    pass

logger = logging.getLogger("django_wurk.scheduler")

#: Entries read per round trip while draining a backlog.
BATCH = 100
#: Boot delay before the first poll, so a fleet restarted at once does not poll in step.
INITIAL_WAIT = 10.0


class Poller(Loop):
    name = "poller"
    SETS = (keys.RETRY, keys.SCHEDULE)

    def tick(self) -> None:
        self.enqueue_due()
        self.cleanup_processes()

    def interval(self) -> float:
        return self.random_interval()

    def enqueue_due(self, now: float | None = None) -> int:
        """Promote every entry due at ``now``; returns how many were pushed."""
        redis = self.wurk.redis
        pushed = 0
        for key in self.SETS:
            while not self.stopping.is_set():
                due_at = time.time() if now is None else now
                members = redis.zrangebyscore(key, "-inf", repr(due_at), start=0, num=BATCH)
                for member in members:
                    pushed += self._promote(key, member)
                if len(members) < BATCH:
                    break
        return pushed

    def _promote(self, key: str, member: bytes) -> int:
        wurk = self.wurk
        payload: wire.Payload | None = None
        try:
            payload = wire.loads(member)
            return int(wurk.client.promote(key, member, payload))
        except ResponseError as exc:
            # WRONGTYPE: the entry names a queue whose key is not a list (promote.lua checks
            # before writing anything). Any other error reply (OOM, READONLY, BUSY) is the
            # server's state, not this entry's.
            if "WRONGTYPE" not in str(exc):
                raise
            error = wire.PayloadError("InvalidPayload", f"it could not be pushed to its queue ({exc})")
        except RedisError:
            raise
        except wire.PayloadError as exc:
            error = exc
        except Exception as exc:
            why = f"{type(exc).__name__}: {wire.error_message(exc)}"
            error = wire.PayloadError("InvalidPayload", f"it could not be promoted ({why})")
        queue = payload.get("queue") if payload is not None else None
        unit = UnitOfWork(queue if isinstance(queue, str) and queue else "default", member)
        logger.error("moving an entry that cannot be promoted from %r to the dead set: %s", key, error)
        # Say where it was: the same bytes may sit in both sets, as two entries.
        error = wire.PayloadError(error.error_class, f"{error} (taken from the {key} set)")
        bury(wurk, invalid_payload_envelope(unit, error, self.config.timestamps), source=key, member=member)
        return 0

    def cleanup_processes(self) -> None:
        """Drop ``processes`` entries whose hash expired (a process killed without a goodbye).

        At most once a minute across the cluster, like Sidekiq 7+. A name whose key holds
        something else than a hash (a list, a string) is no process either: nothing beats
        there. Its key is not ours, so it is left alone.
        """
        redis = self.wurk.redis
        if not redis.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=60):
            return
        identities = list(redis.sscan_iter(keys.PROCESSES))
        if not identities:
            return
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.type(identity)
        kinds = pipe.execute()
        stale = [i for i, kind in zip(identities, kinds, strict=True) if kind != b"hash"]
        if stale:
            redis.srem(keys.PROCESSES, *stale)

    def average_interval(self) -> float:
        if self.config.poll_interval is not None:
            return self.config.poll_interval
        try:
            count = max(int(self.wurk.redis.scard(keys.PROCESSES)), 1)
        except RedisError:
            count = 1
        return count * self.config.average_scheduled_poll_interval

    def random_interval(self) -> float:
        interval = self.average_interval()
        if self.config.poll_interval is None and interval >= 10 * self.config.average_scheduled_poll_interval:
            return interval * random.random() * 2
        return interval * random.random() + interval / 2

    def initial_wait(self) -> float:
        # With a pinned interval (tests, small deployments) the long boot delay only hides jobs.
        if self.config.poll_interval is not None:
            return self.config.poll_interval * random.random()
        return INITIAL_WAIT + 5 * random.random()
