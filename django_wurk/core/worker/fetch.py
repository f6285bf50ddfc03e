"""Fetching jobs: reliable (the default) or basic BRPOP.

**Reliable fetch** moves each job atomically from ``queue:<q>`` into this process's
private list ``queue:sq|<identity>|<q>`` (Sidekiq Pro's naming, so a mixed fleet knows
what it is) and removes it only when the job is finished: succeeded, or its retry or death
recorded. If the process dies, the job is still in Redis and the reaper puts it back.
Acknowledging the previous job rides in the same Lua call as fetching the next, so a busy
worker pays one round trip per job. When every queue is empty, each processor thread
blocks on one queue with BLMOVE (threads are spread over the queues), so a new job starts
at once instead of waiting for a poll, and an idle worker does not spin.

**Basic fetch** is BRPOP across the queues: the job exists only in this process while it
runs, so a crash loses it. It stays available as ``WURK["FETCH"] = "basic"``.

Queue order: strict (the order given) unless queues have weights, then a shuffled list
in which each queue appears ``weight`` times, deduplicated, per fetch — a queue of weight
3 is tried first three times as often as one of weight 1, and none starves.

**Paused queues** (Sidekiq Pro's ``paused`` set, written by ``api.Queue.pause`` and by a
Pro Web UI) are left out of the order. Each process rereads the set at most every
``PAUSED_REFRESH`` seconds, so a pause takes effect within about that long without a
round trip per job. When every queue is paused a fetch waits out its timeout instead of
spinning.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from django_wurk.core import keys
from django_wurk.core.config import Config
from django_wurk.core.connection import Line, Redis
from django_wurk.core.scripts import Scripts

logger = logging.getLogger("django_wurk.fetch")


@dataclass
class UnitOfWork:
    """One fetched job: the queue it came from and the exact bytes stored."""

    queue: str
    raw: bytes


class Fetch(Protocol):
    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        """Acknowledge ``previous`` (finished) and wait up to the fetch timeout for the next job."""

    def acknowledge(self, unit: UnitOfWork) -> None: ...

    def requeue(self, units: list[UnitOfWork]) -> None:
        """At shutdown: put unfinished jobs back where they will be fetched next."""

    def release(self) -> None:
        """The calling processor thread is ending: give back its connection."""


class QueueOrder:
    def __init__(self, config: Config) -> None:
        self.strict = config.strict_order
        self.names = list(config.queue_names)
        self._weighted = [q.name for q in config.weighted_queues for _ in range(q.weight)]

    def __call__(self) -> list[str]:
        if self.strict:
            return self.names
        return list(dict.fromkeys(random.sample(self._weighted, len(self._weighted))))


#: Seconds a process trusts its copy of the ``paused`` set (Sidekiq Pro's fetchers cache it too).
PAUSED_REFRESH = 2.0


class PausedQueues:
    """The ``paused`` set, reread at most every ``PAUSED_REFRESH`` seconds by one thread.

    Reading it on every fetch would add a round trip per job; a pause is an operator's
    action, and taking effect within two seconds is what Sidekiq Pro promises too.
    """

    def __init__(self, redis: Redis, refresh: float = PAUSED_REFRESH) -> None:
        self.redis = redis
        self.refresh = refresh
        self._names: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def names(self) -> frozenset[str]:
        if time.monotonic() - self._read_at < self.refresh:
            return self._names
        with self._lock:
            if time.monotonic() - self._read_at >= self.refresh:  # not refreshed while we waited
                members = self.redis.smembers(keys.PAUSED)
                self._names = frozenset(m.decode("utf-8", "replace") for m in members)
                self._read_at = time.monotonic()
        return self._names

    def running(self, order: list[str]) -> list[str]:
        """``order`` without the paused queues."""
        paused = self.names()
        return [name for name in order if name not in paused] if paused else order


class BasicFetch:
    def __init__(self, config: Config, redis: Redis) -> None:
        self.redis = redis
        self.timeout = config.fetch_timeout
        self.order = QueueOrder(config)
        self.paused = PausedQueues(redis)

    def queue_keys(self) -> list[str]:
        return [keys.queue(name) for name in self.paused.running(self.order())]

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        queue_keys = self.queue_keys()
        if not queue_keys:  # every queue paused: wait as BRPOP would, never spin
            time.sleep(self.timeout)
            return None
        result = self.redis.brpop(queue_keys, timeout=self.timeout)
        if result is None:
            return None
        key, raw = result
        return UnitOfWork(queue=key.decode().removeprefix("queue:"), raw=raw)

    def acknowledge(self, unit: UnitOfWork) -> None:
        """Nothing to acknowledge: the job left Redis when it was fetched."""

    def release(self) -> None:
        """Nothing held: every fetch goes through the pool."""

    def requeue(self, units: list[UnitOfWork]) -> None:
        if not units:
            return
        pipe = self.redis.pipeline(transaction=False)
        for unit in units:
            pipe.rpush(keys.queue(unit.queue), unit.raw)
        pipe.execute()


class ReliableFetch:
    def __init__(self, config: Config, redis: Redis, scripts: Scripts, identity: str) -> None:
        self.redis = redis
        self.scripts = scripts
        self.identity = identity
        self.timeout = config.fetch_timeout
        self.order = QueueOrder(config)
        self.private = {name: keys.private_queue(identity, name) for name in config.queue_names}
        self._keys = {name: (keys.queue(name), self.private[name]) for name in config.queue_names}
        self._lines = threading.local()
        self.paused = PausedQueues(redis)

    def _line(self) -> tuple[Line, Scripts]:
        """This thread's own connection, and the scripts over it (the per-job round trip)."""
        held: tuple[Line, Scripts] | None = getattr(self._lines, "held", None)
        if held is None:
            line = Line(self.redis)
            held = self._lines.held = (line, Scripts(line.call))
        return held

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        order = self.paused.running(self.order())
        if not order:  # every queue paused: acknowledge, then wait as BLMOVE would, never spin
            if previous is not None:
                self.acknowledge(previous)
            time.sleep(self.timeout)
            return None
        script_keys: list[str] = []
        for name in order:
            script_keys += self._keys[name]
        line, scripts = self._line()
        if previous is None:
            found = scripts.fetch(script_keys, "", "")
        else:
            found = scripts.fetch(script_keys, self.private[previous.queue], previous.raw)
        if found:
            key, raw = found
            return UnitOfWork(queue=key.decode()[6:], raw=raw)  # strip "queue:"
        # Every queue is empty: block on one of them until a job arrives. Threads take
        # different queues (by slot), so each queue has a waiter when concurrency allows.
        name = order[slot % len(order)]
        queue_key, private = self._keys[name]
        raw = line.call("BLMOVE", queue_key, private, "RIGHT", "LEFT", self.timeout)
        return UnitOfWork(queue=name, raw=raw) if raw is not None else None

    def acknowledge(self, unit: UnitOfWork) -> None:
        self.redis.lrem(self.private[unit.queue], 1, unit.raw)

    def release(self) -> None:
        held: tuple[Line, Scripts] | None = getattr(self._lines, "held", None)
        if held is not None:
            self._lines.held = None
            held[0].close()

    def requeue(self, units: list[UnitOfWork]) -> None:
        """Put back the given unfinished jobs, then anything else left in our private lists.

        Processor threads acknowledge finished jobs before they exit, so whatever is
        still in a private list at this point did not finish.
        """
        moved = 0
        for unit in units:
            moved += self._move_back(self.private[unit.queue], unit.queue, unit.raw)
        for name, private in self.private.items():
            for raw in self.redis.lrange(private, 0, -1):
                moved += self._move_back(private, name, raw)
        if moved:
            logger.warning("pushed %d unfinished job(s) back from this process's private lists", moved)

    def _move_back(self, private: str, queue_name: str, raw: bytes) -> int:
        return int(self.scripts.requeue(private, raw, raw, queue_name))


def fetch_for(config: Config, redis: Redis, scripts: Scripts, identity: str) -> BasicFetch | ReliableFetch:
    if config.fetch == "basic":
        return BasicFetch(config, redis)
    return ReliableFetch(config, redis, scripts, identity)


def seconds_since(beat: bytes | None) -> float | None:
    try:
        return time.time() - float(beat) if beat is not None else None
    except ValueError:
        return None
