"""Basic fetch: BRPOP across the configured queues.

BRPOP takes the oldest job (clients LPUSH at the head) from the first non-empty queue in
the order given, which is what strict priority needs. Weighted order shuffles a list in
which each queue appears ``weight`` times and keeps each queue's first appearance, so a
queue of weight 3 is tried first three times as often as one of weight 1, and no queue
starves. The 2-second timeout bounds how long a fetcher takes to notice a shutdown.

With BRPOP the job exists only in this process's memory while it runs; a crash loses
it. Shutdown pushes unfinished jobs back with RPUSH (to the tail, so they run next).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django_wurk import keys
from django_wurk.config import Config
from django_wurk.redis import Redis


@dataclass
class UnitOfWork:
    """One fetched job: the queue it came from and the exact bytes stored."""

    queue: str
    raw: bytes

    def acknowledge(self) -> None:
        """Basic fetch keeps nothing to acknowledge; reliable fetch will."""


class BasicFetch:
    def __init__(self, config: Config, redis: Redis) -> None:
        self.redis = redis
        self.timeout = config.fetch_timeout
        self.strict = config.strict_order
        self._strict_keys = [keys.queue(name) for name in config.queue_names]
        self._weighted = [keys.queue(q.name) for q in config.weighted_queues for _ in range(q.weight)]

    def queue_keys(self) -> list[str]:
        if self.strict:
            return self._strict_keys
        shuffled = random.sample(self._weighted, len(self._weighted))
        return list(dict.fromkeys(shuffled))

    def fetch(self) -> UnitOfWork | None:
        """Block up to the fetch timeout for a job; ``None`` when all queues stayed empty."""
        result = self.redis.brpop(self.queue_keys(), timeout=self.timeout)
        if result is None:
            return None
        key, raw = result
        return UnitOfWork(queue=key.decode().removeprefix("queue:"), raw=raw)

    def requeue(self, units: list[UnitOfWork]) -> None:
        """Put unfinished jobs back at the tail of their queues, so they are fetched next."""
        if not units:
            return
        pipe = self.redis.pipeline(transaction=False)
        for unit in units:
            pipe.rpush(keys.queue(unit.queue), unit.raw)
        pipe.execute()
