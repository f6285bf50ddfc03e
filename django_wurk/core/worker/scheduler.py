"""The poller: promote due jobs from the retry and schedule sets onto their queues.

Each due entry is read, given a fresh ``enqueued_at`` and passed through the client
middleware, then moved by one Lua script that removes it from the sorted set and pushes
it in the same atomic step. Two pollers racing for one entry cannot both push it (the
ZREM decides), and a crash between "remove" and "push" cannot happen, so promotion never
loses or duplicates a job. An entry that cannot be promoted (it cannot be decoded or
encoded again, or its queue's key is not a list) goes to the dead set as its exact bytes
with the reason, in one script that also removes it, so racing pollers bury it once; the
pass then goes on with the entries behind it. An entry on which the client middleware
raises is logged and left where it is for the next pass: a middleware may fail for a
while (a database it needs is down), and that must neither bury every due job nor stop
the pass at the first one.

The sleep between polls follows Sidekiq: the cluster-wide average interval scaled by the
number of processes, randomised so processes spread their polls out.
"""

from __future__ import annotations

import logging
import random
import time

from redis.exceptions import RedisError, ResponseError

from django_wurk.core import keys, wire
from django_wurk.core.dead_set import bury, invalid_payload_envelope
from django_wurk.core.worker.routine import Routine

logger = logging.getLogger("django_wurk.scheduler")

#: Entries read per round trip while draining a backlog.
BATCH = 100
#: Boot delay before the first poll, so a fleet restarted at once does not poll in step.
INITIAL_WAIT = 10.0


class Poller(Routine):
    name = "poller"
    SETS = (keys.RETRY, keys.SCHEDULE)
    #: Whether this pass has logged a middleware failure's traceback already.
    _traced = False

    def tick(self) -> None:
        self.enqueue_due()
        self.cleanup_processes()

    def interval(self) -> float:
        return self.random_interval()

    def enqueue_due(self, now: float | None = None) -> int:
        """Promote every entry due at ``now``; returns how many were pushed."""
        redis = self.wurk.redis
        pushed = 0
        self._traced = False
        for key in self.SETS:
            # Entries left in place this pass (their middleware failed) stay at the front of
            # the due range: reading on behind them, not from the start, keeps the pass going.
            left = 0
            while not self.stopping.is_set():
                due_at = time.time() if now is None else now
                members = redis.zrangebyscore(key, "-inf", repr(due_at), start=left, num=BATCH)
                for member in members:
                    outcome = self._promote(key, member)
                    pushed += outcome is True
                    left += outcome is None
                if len(members) < BATCH:
                    break
        return pushed

    def _promote(self, key: str, member: bytes) -> bool | None:
        """True if pushed; False if gone (buried, dropped, or taken by another poller); None if left."""
        wurk = self.wurk
        payload: wire.Payload | None = None
        try:
            payload = wire.loads(member)
            try:
                prepared = wurk.client.promotion(payload)
            except Exception as exc:
                self._middleware_failed(key, payload, exc)
                return None
            return wurk.client.move(key, member, payload, prepared)
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
        queue = queue if isinstance(queue, str) and queue else "default"
        logger.error("moving an entry that cannot be promoted from %r to the dead set: %s", key, error)
        # Say where it was: the same bytes may sit in both sets, as two entries.
        error = wire.PayloadError(error.error_class, f"{error} (taken from the {key} set)")
        envelope = invalid_payload_envelope(queue, member, error, self.config.timestamps)
        bury(wurk, envelope, source=key, member=member)
        return False

    def _middleware_failed(self, key: str, payload: wire.Payload, exc: Exception) -> None:
        """A client middleware raised: leave the entry where it is, due, for the next pass.

        Unlike an entry that cannot be read or written, the cause may pass (a database the
        middleware needs is down), and burying would send every due job to the dead set.
        A middleware that always raises keeps its jobs here, logged on every pass (with the
        traceback once a pass: the jobs behind the first most likely fail the same way).
        """
        logger.error(
            "client middleware raised on job %s in the %s set (%s: %s); it stays there for the next pass",
            payload.get("jid"),
            key,
            type(exc).__name__,
            wire.error_message(exc),
            exc_info=None if self._traced else exc,
        )
        self._traced = True
        self.wurk.report_error(exc, {"context": "poller: client middleware", "job": payload, "set": key})

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
