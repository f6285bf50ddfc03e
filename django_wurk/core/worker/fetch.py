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

**A queue whose key is not a list** (another program's SET or HSET on ``queue:<q>``) makes
every LMOVE or BRPOP on it fail with WRONGTYPE. It must not cost the other queues their
worker, and it is not an outage: the fetch goes on with the other queues, the queue is left
out of this process's order for ``WRONG_TYPE_RECHECK`` seconds and then tried again, and an
ERROR names it at most once per ``WRONG_TYPE_REPORT_EVERY`` seconds. The key is the user's
data: it is never deleted or rewritten.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import ResponseError

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

    def push_back(self, units: list[UnitOfWork]) -> int:
        """Put these fetched jobs (only these) back where they will be fetched next."""

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


#: A queue whose key is not a list is left out of a process's fetch order this long, then
#: tried again: a key that was fixed is served again within about this long.
WRONG_TYPE_RECHECK = 5.0
#: ...and named in an ERROR at most once per this long per queue: seen, never a flood.
WRONG_TYPE_REPORT_EVERY = 60.0


class WrongTypeQueues:
    """Queues whose key holds something other than a list, left out of the fetch order for a while.

    Shared by a process's processor threads. Reading it costs one truth test of an empty
    dict on the per-job path; the lock is taken only when something is wrong.
    """

    def __init__(
        self, recheck: float = WRONG_TYPE_RECHECK, report_every: float = WRONG_TYPE_REPORT_EVERY
    ) -> None:
        self.recheck = recheck
        self.report_every = report_every
        #: Queue name -> monotonic time until which the queue is left out.
        self.skipped: dict[str, float] = {}
        self._reported: dict[str, float] = {}
        self._lock = threading.Lock()

    def found(self, name: str, key: str, kind: str) -> None:
        """``key`` of queue ``name`` holds a ``kind``: leave the queue out, and say so if not said lately."""
        now = time.monotonic()
        with self._lock:
            self.skipped[name] = now + self.recheck
            last = self._reported.get(name)
            report = last is None or now - last >= self.report_every
            if report:
                self._reported[name] = now
        if report:
            logger.error(
                "queue %r cannot be fetched from: its key %r holds a %s, not a list. This worker fetches"
                " from its other queues and tries %r again every %g s; the key is left as it is (delete it,"
                " or rename it, to let the queue run again)",
                name,
                key,
                kind,
                name,
                self.recheck,
            )

    def running(self, order: list[str]) -> list[str]:
        """``order`` without the queues left out now."""
        if not self.skipped:
            return order
        now = time.monotonic()
        with self._lock:
            for name, until in list(self.skipped.items()):
                if until <= now:
                    del self.skipped[name]
            skipped = set(self.skipped)
        return [name for name in order if name not in skipped] if skipped else order

    def check(self, names: Sequence[str], kinds: Sequence[Any]) -> bool:
        """Leave out and name each queue whose key's TYPE (in ``kinds``) is not a list; False if none."""
        found = False
        for name, kind in zip(names, kinds, strict=True):
            text = kind.decode() if isinstance(kind, bytes) else str(kind)
            if text not in ("list", "none"):
                self.found(name, keys.queue(name), text)
                found = True
        return found

    def forget(self) -> None:
        """Try every queue again and report what is still wrong, as if the intervals had passed."""
        with self._lock:
            self.skipped.clear()
            self._reported.clear()


class BasicFetch:
    def __init__(self, config: Config, redis: Redis) -> None:
        self.redis = redis
        self.timeout = config.fetch_timeout
        self.order = QueueOrder(config)
        self.paused = PausedQueues(redis)
        self.wrong_type = WrongTypeQueues()

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        while True:
            names = self.wrong_type.running(self.paused.running(self.order()))
            if not names:  # every queue paused (or unreadable): wait as BRPOP would, never spin
                time.sleep(self.timeout)
                return None
            try:
                result = self.redis.brpop([keys.queue(name) for name in names], timeout=self.timeout)
                break
            except ResponseError as exc:
                # BRPOP stops at the first key of the wrong type it meets, without naming it:
                # find it, leave it out, and go on with the others (each pass leaves one more out).
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                if not self.wrong_type.check(names, self._types(names)):
                    return None  # fixed in the meantime
        if result is None:
            return None
        key, raw = result
        return UnitOfWork(queue=key.decode().removeprefix("queue:"), raw=raw)

    def _types(self, names: list[str]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.type(keys.queue(name))
        return list(pipe.execute())

    def acknowledge(self, unit: UnitOfWork) -> None:
        """Nothing to acknowledge: the job left Redis when it was fetched."""

    def release(self) -> None:
        """Nothing held: every fetch goes through the pool."""

    def requeue(self, units: list[UnitOfWork]) -> None:
        self.push_back(units)

    def push_back(self, units: list[UnitOfWork]) -> int:
        if not units:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for unit in units:
            pipe.rpush(keys.queue(unit.queue), unit.raw)
        pipe.execute()
        return len(units)


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
        self.wrong_type = WrongTypeQueues()

    def _line(self) -> tuple[Line, Scripts]:
        """This thread's own connection, and the scripts over it (the per-job round trip)."""
        held: tuple[Line, Scripts] | None = getattr(self._lines, "held", None)
        if held is None:
            line = Line(self.redis)
            held = self._lines.held = (line, Scripts(line.call))
        return held

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        order = self.paused.running(self.order())
        if self.wrong_type.skipped:
            order = self.wrong_type.running(order)
        if not order:  # every queue paused (or unreadable): acknowledge, then wait as BLMOVE would
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
            if len(found) > 2:  # some queue's key is not a list (fetch.lua went on past it)
                for at in range(2, len(found), 3):
                    self.wrong_type.found(
                        found[at].decode()[6:], found[at + 1].decode(), found[at + 2].decode()
                    )
                order = self.wrong_type.running(order)
            key = found[0]
            if key:
                return UnitOfWork(queue=key.decode()[6:], raw=found[1])  # strip "queue:"
            if not order:
                return None  # the next fetch waits
        # Every queue is empty: block on one of them until a job arrives. Threads take
        # different queues (by slot), so each queue has a waiter when concurrency allows.
        # (A key that turned into another type since the script ran fails this one wait like
        # an outage would; the next fetch's script names it and leaves it out.)
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

    def listed(self) -> list[UnitOfWork]:
        """Every job in this process's private lists, whether a thread holds it or not."""
        pipe = self.redis.pipeline(transaction=False)
        for private in self.private.values():
            pipe.lrange(private, 0, -1)
        lists = zip(self.private, pipe.execute(), strict=True)
        return [UnitOfWork(name, raw) for name, raws in lists for raw in raws]

    def push_back(self, units: list[UnitOfWork]) -> int:
        """Move these jobs from our private lists back to their queues; each only if still there."""
        return sum(self._move_back(self.private[unit.queue], unit.queue, unit.raw) for unit in units)

    def _move_back(self, private: str, queue_name: str, raw: bytes) -> int:
        return int(self.scripts.requeue(private, raw, raw, queue_name))


def fetch_for(config: Config, redis: Redis, scripts: Scripts, identity: str) -> BasicFetch | ReliableFetch:
    if config.fetch == "basic":
        return BasicFetch(config, redis)
    return ReliableFetch(config, redis, scripts, identity)
