"""The poller: promote due jobs from the retry and schedule sets onto their queues.

Each due entry is read, given a fresh ``enqueued_at`` and passed through the client
middleware, then moved by one Lua script that removes it from the sorted set and pushes
it in the same atomic step. Two pollers racing for one entry cannot both push it (the
ZREM decides), and a crash between "remove" and "push" cannot happen, so promotion never
loses or duplicates a job. Entries we cannot decode go to the dead set, not back round.

The sleep between polls follows Sidekiq: the cluster-wide average interval scaled by the
number of processes, randomised so processes spread their polls out.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

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
        try:
            payload = wire.loads(member)
        except wire.PayloadError as error:
            logger.error("moving an unreadable entry from %r to the dead set: %s", key, error)
            envelope = invalid_payload_envelope(UnitOfWork("default", member), error, self.config.timestamps)
            bury(wurk, envelope, source=key, member=member)
            return 0
        return int(wurk.client.promote(key, member, payload))

    def cleanup_processes(self) -> None:
        """Drop ``processes`` entries whose hash expired (a process killed without a goodbye).

        At most once a minute across the cluster, like Sidekiq 7+.
        """
        redis = self.wurk.redis
        if not redis.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=60):
            return
        identities = list(redis.sscan_iter(keys.PROCESSES))
        if not identities:
            return
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.exists(identity)
        alive = pipe.execute()
        stale = [i for i, ok in zip(identities, alive, strict=True) if not ok]
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
