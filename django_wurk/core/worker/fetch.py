"""Fetching jobs: reliable (the default) or basic BRPOP.

**Reliable fetch** moves each job atomically from ``queue:<q>`` into this process's
private list ``queue:sq|<identity>|<q>`` (Sidekiq Pro's naming, so a mixed fleet knows
what it is) and removes it only when the job is finished: succeeded, or its retry or death
recorded. If the process dies, the job is still in Redis and the reaper puts it back.
Acknowledging finished jobs rides in the same Lua call as fetching the next. From a queue
with a backlog (more jobs waiting than threads) one call takes up to ``FETCH_AT_MOST``
jobs, all in the private list at once; the process keeps the extra ones in memory and any
thread's next fetch takes one without a round trip, leaving its finished job to be
acknowledged with the next round trip of any thread. A busy worker so pays about one round
trip per ``FETCH_AT_MOST`` jobs. ``ReliableFetch`` bounds what this costs: fewer than
``FETCH_AT_MOST * concurrency`` finished jobs wait for their acknowledgement (what a crash
runs again besides the running ones); a job taken along that no thread starts within
``HAND_BACK_AFTER`` goes back to the head of its queue (so none waits behind long jobs
while another process idles); and a recovered job runs alone (so none that merely waited
beside a poison pill is charged with it). Jobs taken along from a lower queue may start
before a job that just arrived in a higher one. A thread that ends (quiet, stop) pushes back
the jobs taken along and not started. When every queue is empty, each processor thread
blocks on one queue with BLMOVE (threads are spread over the queues), so a new job starts
at once instead of waiting for a poll, and an idle worker does not spin.

**Priority and caps** (docs/priority.md): a queue's priority lists (``<q>@<p>``, from
``core/priority.py``) take its place in the order, highest first, and fetch.lua passes over a
capped queue (``worker/caps.py``) whose cap is reached, in the same round trip.

**Basic fetch** is BRPOP across the queues: the job exists only in this process while it
runs, so a crash loses it. It stays available as ``WURK["FETCH"] = "basic"``.

Queue order: strict (the order given) unless queues have weights, then drawn per fetch as
if from a shuffled list in which each queue appears ``weight`` times, deduplicated
(``QueueOrder``) — a queue of weight 3 is tried first three times as often as one of
weight 1, and none starves.

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
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import RedisError, ResponseError

from django_wurk.core import keys
from django_wurk.core.config import Config
from django_wurk.core.connection import Line, Redis
from django_wurk.core.priority import PriorityLists, waiting_order
from django_wurk.core.scripts import Scripts
from django_wurk.core.worker.caps import CAP_POLL, QueueCaps

logger = logging.getLogger("django_wurk.fetch")


@dataclass
class UnitOfWork:
    """One fetched job: the queue it came from and the exact bytes stored."""

    queue: str
    raw: bytes


class Fetch(Protocol):
    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        """Take ``previous`` (finished) to acknowledge, and wait up to the fetch timeout for the next job.

        ``previous`` is the fetch's from then on, even if this call raises: never pass it again.
        """

    def acknowledge(self, unit: UnitOfWork | None = None) -> None:
        """Acknowledge ``unit`` and every finished job the calling thread handed over before."""

    def requeue(self, units: list[UnitOfWork]) -> None:
        """At shutdown: put unfinished jobs back where they will be fetched next."""

    def push_back(self, units: list[UnitOfWork], behind: bool = False) -> int:
        """Put these fetched jobs (only these) back where they will be fetched next, or
        ``behind`` the jobs waiting in their queues (where a new job goes)."""

    def release(self) -> None:
        """The calling processor thread is ending: give back its connection."""

    def abandon(self, thread: threading.Thread, unit: UnitOfWork | None) -> None:
        """``thread`` was given up on while it ran ``unit`` (``Manager.abandon``): settle for it.

        ``unit`` (None when its outcome could not be recorded) and the jobs the thread finished
        before are acknowledged, and the thread holds nothing from now on: it never touches
        the fetch again, even if it comes back.
        """


class QueueOrder:
    """The order one fetch tries the queues in: as given, or drawn by weight for each fetch.

    A weighted order is the order in which the queues first appear in a shuffle of a list
    holding each queue ``weight`` times (Sidekiq's ``shuffle.uniq``): the first queue is q
    with probability ``weight(q) / total``, the next one likewise among the others, and so
    on. Shuffling that list costs time in the sum of the weights at every round trip (50
    queues of weight 10: 500 entries); drawing the same order directly costs time in the
    number of queues: each queue gets the key ``u ** (1 / weight)``, u uniform in [0, 1),
    and the order is by key, highest first (Efraimidis and Spirakis's weighted sampling
    without replacement, which gives each order exactly the shuffle's probability).
    """

    def __init__(self, config: Config) -> None:
        self.strict = config.strict_order
        self.names = list(config.queue_names)
        weights: dict[str, int] = {}
        for q in config.weighted_queues:  # a queue named twice counts with both weights, as in the shuffle
            weights[q.name] = weights.get(q.name, 0) + q.weight
        self._exponents = [(name, 1 / weight) for name, weight in weights.items()]

    def __call__(self) -> list[str]:
        if self.strict:
            return self.names
        draw = random.random
        keys = {name: draw() ** exponent for name, exponent in self._exponents}
        return sorted(keys, key=keys.__getitem__, reverse=True)


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
        self.priorities = PriorityLists(lambda: redis.smembers(keys.QUEUES), config.queue_names)

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        while True:
            names = self.wrong_type.running(self.priorities.expand(self.paused.running(self.order())))
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

    def acknowledge(self, unit: UnitOfWork | None = None) -> None:
        """Nothing to acknowledge: the job left Redis when it was fetched."""

    def release(self) -> None:
        """Nothing held: every fetch goes through the pool."""

    def abandon(self, thread: threading.Thread, unit: UnitOfWork | None) -> None:
        """Nothing to acknowledge, nothing held."""

    def requeue(self, units: list[UnitOfWork]) -> None:
        self.push_back(units)

    def push_back(self, units: list[UnitOfWork], behind: bool = False) -> int:
        if not units:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for unit in units:
            if behind:
                pipe.lpush(keys.queue(unit.queue), unit.raw)
            else:
                pipe.rpush(keys.queue(unit.queue), unit.raw)
        pipe.execute()
        return len(units)


#: Most jobs one reliable fetch takes from a queue with a backlog. One round trip then serves
#: up to this many jobs: the per-job cost of a busy worker that is mostly Redis replies falls.
FETCH_AT_MOST = 8
#: Seconds: a thread takes jobs along only when its last fetch was this recent (its last job,
#: with the round trip and any wait for the GIL, was short). A round trip matters next to a
#: short job; next to a long one it is nothing.
SHORT_JOB = 0.05
#: Bytes: a fetch takes no more jobs along once those it took hold this many. A round trip
#: costs a worker about what reading 10 KB of payload does (docs/benchmarks.md, "Cost as
#: work grows"), so batching large jobs saves little, while every job held costs memory and
#: lengthens each acknowledgement: LREM compares the payload with each entry it passes, and
#: payloads alike but for the jid (which comes after the arguments) compare their full length.
TAKE_ALONG_BYTES = 64 * 1024
#: Seconds a job taken along may wait in memory for a thread of this process before it goes
#: back to the head of its queue, where any idle thread of any process takes it. A free thread
#: takes a ready job within microseconds; one still there this long waits behind running jobs.
HAND_BACK_AFTER = 0.1
#: Seconds the hand-back watcher lives with no thread fetching (a fetch made and never used,
#: or a stopped worker's); a thread that fetches later starts it again.
WATCHER_IDLE = 5.0
#: The payload of a job the reaper recovered says so; such a job runs alone (``_isolate``).
RECOVERED_MARK = b'"recovered":'


class _Thread:
    """One processor thread's share of a reliable fetch: its connection, and its job.

    ``current`` is the job the fetch last handed it, still in a private list and held:
    ``ReliableFetch.held`` counts it.
    """

    __slots__ = ("alone", "current", "handed_at", "line", "scripts", "thread")

    def __init__(self, line: Line) -> None:
        #: The thread it serves, so that ``ReliableFetch.abandon`` can find it from another one.
        self.thread = threading.current_thread()
        self.line = line
        self.scripts = Scripts(line.call, line.pipeline)
        self.current: UnitOfWork | None = None
        #: Its current job is a recovered one, running alone (``ReliableFetch._isolate``).
        self.alone = False
        #: ``time.monotonic()`` at the start of its last fetch (or its first): the next fetch
        #: knows how long the job in between took.
        self.handed_at = time.monotonic()


class ReliableFetch:
    """Reliable fetch, with two bounds that make a crash and a long job cheap.

    * **One pool of finished jobs waiting for their acknowledgement**, process-wide: it rides
      on the next round trip of any thread (each sent once: ``_acking`` holds those in
      flight), and a thread starts a job from memory only while fewer than
      ``unacked_at_most`` wait; otherwise it makes the round trip. A ``kill -9`` runs again
      the jobs running and those. (Bounding it by ``concurrency`` made a GIL-bound drain
      pay a round trip per job or two, measured: every thread holds a job at once.)
    * **No job waits in memory behind running jobs**: jobs taken along that no thread of this
      process started within ``HAND_BACK_AFTER`` are moved back to the head of their queue
      (one step each, only if still in the private list), where an idle thread of any
      process takes them.

    A job the reaper recovered (its payload carries ``recovered``) runs alone: before it
    starts, the jobs taken along go back and the finished ones are acknowledged, and no job is
    taken along while it runs, so if it kills its process again only it and the jobs other
    threads were running are charged with the recovery — a job that merely waited beside it
    is never buried as poison.
    """

    def __init__(self, config: Config, redis: Redis, scripts: Scripts, identity: str) -> None:
        self.redis = redis
        self.scripts = scripts
        self.identity = identity
        self.timeout = config.fetch_timeout
        self.concurrency = max(1, config.concurrency)
        self.unacked_at_most = FETCH_AT_MOST * self.concurrency
        #: A fetch takes one more job only per this many still waiting in its queue, so a
        #: short queue goes one job per thread, and only a backlog is taken several at a time.
        self.spread = max(1, config.concurrency)
        self.short_job = SHORT_JOB
        self.hand_back_after = HAND_BACK_AFTER
        self.order = QueueOrder(config)
        self.private = {name: keys.private_queue(identity, name) for name in config.queue_names}
        self._keys = {name: (keys.queue(name), self.private[name]) for name in config.queue_names}
        self.priorities = PriorityLists(lambda: redis.smembers(keys.QUEUES), config.queue_names)
        self.caps = QueueCaps(config)
        self._local = threading.local()
        #: Jobs a fetch took along, not started yet: the next fetch of any thread takes one
        #: without a round trip; ``_ready_at`` is when the oldest of them arrived.
        self._ready: deque[UnitOfWork] = deque()
        self._ready_at = 0.0
        #: Finished jobs whose acknowledgement has not reached Redis: the next round trip of
        #: any thread takes them along (they count as started until its reply).
        self._done: list[UnitOfWork] = []
        #: Finished jobs a round trip is acknowledging now (still counted, still held).
        self._acking: list[UnitOfWork] = []
        #: Threads running a recovered job alone: while any does, nothing is taken along.
        self._alone = 0
        #: Every thread's share; ``_lock`` makes each job's move between the ready jobs, a
        #: thread's current job and the finished ones a single step for ``held``.
        self._threads: list[_Thread] = []
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self.paused = PausedQueues(redis)
        self.wrong_type = WrongTypeQueues()
        # Started here, by the thread that builds the worker, not by a processor thread's
        # first fetch: a job thread starts no thread of its own.
        self._watch()

    def _thread(self) -> _Thread:
        """The calling thread's share, made on its first fetch."""
        mine: _Thread | None = getattr(self._local, "mine", None)
        if mine is None:
            mine = self._local.mine = _Thread(Line(self.redis))
            with self._lock:
                self._threads.append(mine)
                watching = self._watcher is not None and self._watcher.is_alive()
            if not watching:  # ended after a while with no thread (a stopped worker's)
                self._watch()
        return mine

    def _watch(self) -> None:
        """Start the thread that gives back jobs waiting behind running ones (``_watch_ready``)."""
        watcher = threading.Thread(target=self._watch_ready, name="wurk-fetch-hand-back", daemon=True)
        with self._lock:
            if self._watcher is not None and self._watcher.is_alive():
                return
            self._watcher = watcher
        watcher.start()

    def held(self) -> list[UnitOfWork]:
        """Every job this fetch took that is still in a private list by its doing: ready,
        running, or finished and not acknowledged yet. A job in a private list that is not
        here (nor in a fetch whose reply is still coming) is held by no one."""
        with self._lock:
            units = list(self._ready) + self._done + self._acking
            for mine in self._threads:
                if mine.current is not None:
                    units.append(mine.current)
        return units

    def _started(self) -> int:
        """Jobs started and not acknowledged (under ``_lock``): what a crash would run again."""
        return len(self._done) + sum(1 for share in self._threads if share.current is not None)

    def _finish(self, mine: _Thread, previous: UnitOfWork | None) -> None:
        """``mine``'s job ``previous`` is finished (under ``_lock``)."""
        if previous is not None:
            self._done.append(previous)
        if mine.alone:
            mine.alone = False
            self._alone -= 1
        mine.current = None

    def fetch(self, previous: UnitOfWork | None = None, slot: int = 0) -> UnitOfWork | None:
        mine = self._thread()
        now = time.monotonic()
        short = now - mine.handed_at < self.short_job
        mine.handed_at = now
        with self._lock:
            self._finish(mine, previous)
            if self._ready and self._unacked() < self.unacked_at_most:
                return self._handed(mine, self._ready.popleft())
            # Otherwise a round trip, which acknowledges the finished jobs on its way.
        order = self.priorities.expand(self.paused.running(self.order()))
        if self.wrong_type.skipped:
            order = self.wrong_type.running(order)
        if not order:  # every queue paused (or unreadable): acknowledge, then wait as BLMOVE would
            self.acknowledge()
            time.sleep(self.timeout)
            return None
        script_keys: list[str] = []
        for name in order:
            script_keys += self._keys.get(name) or self._listed(name)
        with self._lock:
            done = self._sending()
            along = FETCH_AT_MOST if short and not self._alone and len(self._ready) < FETCH_AT_MOST else 1
        try:
            found = mine.scripts.fetch(
                script_keys,
                [(self.private[unit.queue], unit.raw) for unit in done] if done else (),
                along,
                self.spread,
                TAKE_ALONG_BYTES,
                self.caps.args(order) if self.caps.caps else (),
            )
        except BaseException:
            self._unsent(done)
            raise
        taken = int(found[1]) if found else 0
        unit: UnitOfWork | None = None
        over = False
        with self._lock:
            self._forget(done)
            if found and taken:
                queue = found[0].decode()[6:]  # strip "queue:"
                unit = UnitOfWork(queue, found[2])
                if taken > 1 or self._ready:
                    if not self._ready:
                        self._ready_at = time.monotonic()
                    else:  # the round trip was for the acknowledgements: the oldest goes first
                        self._ready.append(unit)
                        unit = self._ready.popleft()
                    self._ready.extend(UnitOfWork(queue, raw) for raw in found[3 : 2 + taken])
                over = self._unacked() >= self.unacked_at_most
        if unit is not None and over:
            # Rare: other threads finished jobs while this round trip was on its way.
            self.acknowledge()
        if found:
            if len(found) > 2 + taken:  # some queue's key is not a list (fetch.lua went on past it)
                for at in range(2 + taken, len(found), 3):
                    self.wrong_type.found(
                        found[at].decode()[6:], found[at + 1].decode(), found[at + 2].decode()
                    )
                order = self.wrong_type.running(order)
            if unit is not None:
                with self._lock:
                    return self._handed(mine, unit)
            if not order:
                return None  # the next fetch waits
        # Every queue is empty: block on one of them until a job arrives. Threads take
        # different queues (by slot), so each queue has a waiter when concurrency allows.
        # (A key that turned into another type since the script ran fails this one wait like
        # an outage would; the next fetch's script names it and leaves it out.)
        name = waiting_order(order)[slot % len(order)]
        if self.caps.caps and self.caps.capped(name):  # a blocking move would take a job past the cap
            time.sleep(min(self.timeout, CAP_POLL))
            return None
        queue_key, private = self._keys[name]
        raw = mine.line.call("BLMOVE", queue_key, private, "RIGHT", "LEFT", self.timeout)
        if raw is None:
            return None
        with self._lock:
            return self._handed(mine, UnitOfWork(queue=name, raw=raw))

    def _listed(self, name: str) -> tuple[str, str]:
        """The keys of a priority list (``core/priority.py``), learnt while running: from now on
        its jobs are acknowledged, pushed back and swept at the stop like any queue's."""
        private = keys.private_queue(self.identity, name)
        self.private[name] = private
        pair = self._keys[name] = (keys.queue(name), private)
        return pair

    def _handed(self, mine: _Thread, unit: UnitOfWork) -> UnitOfWork:
        """``_start`` (under ``_lock``); a recovered job's isolation is done outside the lock."""
        ready = self._start(mine, unit)
        if ready is not None:
            self._lock.release()
            try:
                self._alone_now(ready)
            finally:
                self._lock.acquire()
        return unit

    def _start(self, mine: _Thread, unit: UnitOfWork) -> list[UnitOfWork] | None:
        """Hand ``unit`` to ``mine`` (under ``_lock``, in the step that took it, so ``held``
        never misses it). For a recovered job, the jobs taken along, to give back (``_alone``)."""
        mine.current = unit
        if RECOVERED_MARK not in unit.raw:
            return None
        mine.alone = True
        self._alone += 1
        ready = list(self._ready)
        self._ready.clear()
        return ready

    def _alone_now(self, ready: list[UnitOfWork]) -> None:
        """A recovered job is about to run: nothing else of ours may be charged if it kills us
        again, so the jobs taken along go back and the finished ones are acknowledged first."""
        self._give_back(ready)
        self.acknowledge()

    def _give_back(self, ready: list[UnitOfWork]) -> None:
        """Move jobs taken along and not started back to the head of their queues."""
        if not ready:
            return
        try:
            moved = self.push_back(ready[::-1])  # each to the fetching end: the first goes last
        except RedisError as exc:
            # They stay in the private list, held by no one: the stray sweep or the stop puts them back.
            logger.warning("could not give back %d job(s) not started yet: %s", len(ready), exc)
        else:
            logger.debug("gave back %d job(s) taken along but not started", moved)

    def _watch_ready(self) -> None:
        """Give back jobs taken along that no thread started in ``hand_back_after`` seconds:
        every thread of this process is busy, and another process may have a free one."""
        idle = 0.0
        while True:
            time.sleep(self.hand_back_after / 2)
            with self._lock:
                if not self._threads:
                    idle += self.hand_back_after / 2
                    if idle >= WATCHER_IDLE:  # no thread for a while: a stopped worker's fetch
                        self._watcher = None
                        return
                    continue
                idle = 0.0
                if not self._ready or time.monotonic() - self._ready_at < self.hand_back_after:
                    continue
                ready = list(self._ready)
                self._ready.clear()
            self._give_back(ready)

    def _unacked(self) -> int:
        """Finished jobs whose acknowledgement has not reached Redis (under ``_lock``)."""
        return len(self._done) + len(self._acking)

    def _sending(self) -> list[UnitOfWork]:
        """The finished jobs a round trip starting now acknowledges (under ``_lock``): from
        pending to in flight, so that no other thread's round trip sends them again."""
        done = self._done
        if done:
            self._done = []
            self._acking.extend(done)
        return done

    def _unsent(self, done: list[UnitOfWork]) -> None:
        """A round trip that was to acknowledge ``done`` failed: pending again (they may be
        acknowledged already, if Redis ran it; acknowledging twice removes nothing more)."""
        if done:
            with self._lock:
                self._forget(done)
                self._done[:0] = done

    def _forget(self, acknowledged: list[UnitOfWork]) -> None:
        """These finished jobs are acknowledged (under ``_lock``)."""
        if acknowledged:
            gone = {id(u) for u in acknowledged}
            self._acking = [u for u in self._acking if id(u) not in gone]

    def acknowledge(self, unit: UnitOfWork | None = None) -> None:
        """Write every pending acknowledgement now (``unit`` first counted as finished)."""
        mine = self._thread()
        with self._lock:
            if unit is not None:
                if mine.current is unit:
                    self._finish(mine, unit)
                elif not any(u is unit for u in self._done):  # a retry hands it again
                    self._done.append(unit)
            done = self._sending()
        if not done:
            return
        self._remove(done, done)
        with self._lock:
            self._forget(done)

    def _remove(self, done: list[UnitOfWork], pending: list[UnitOfWork]) -> None:
        """``LREM`` each of ``done`` from its private list, in one round trip; if Redis does not
        answer, ``pending`` (those of them taken from the pool) are pending again."""
        try:
            pipe = self.redis.pipeline(transaction=False)
            for finished in done:
                pipe.lrem(self.private[finished.queue], -1, finished.raw)
            pipe.execute()
        except BaseException:
            self._unsent(pending)
            raise

    def abandon(self, thread: threading.Thread, unit: UnitOfWork | None) -> None:
        """``thread`` was given up on while it ran ``unit`` (``Manager.abandon``): settle for it.

        Called from another thread (the watchdog's): the stuck one is left to itself. Its
        job ``unit``, whose failure is recorded (None when it could not be: it then stays in
        the private list, held by no one, for a stray sweep or the stop to push back), and
        the finished jobs it had not acknowledged yet are removed from the private lists;
        only then is its share retired, so a stray sweep in between still sees them held and
        never pushes them back. From then on ``held`` reports nothing of it, its connection
        is back in the pool, and the thread, if it ever returns, leaves the fetch alone
        (``Processor``); the thread put in its place gets a share of its own.
        If Redis does not answer, the error propagates and the share stays as it was.
        """
        with self._lock:
            mine = next((share for share in self._threads if share.thread is thread), None)
            pending = self._sending()
        done = list(pending)
        if unit is not None and not any(u is unit for u in done):
            done.append(unit)
        if done:
            self._remove(done, pending)
        with self._lock:
            self._forget(done)
            if mine is None:
                return
            if mine.alone:
                mine.alone = False
                self._alone -= 1
            mine.current = None
            if mine in self._threads:
                self._threads.remove(mine)
        mine.line.close()

    def release(self) -> None:
        """The calling thread is done: give back its connection, and the ready jobs.

        A quieting worker starts no more jobs, so the ones taken along go back to their
        queues now (for another worker) rather than wait in a private list for the stop.
        If Redis does not answer, they stay there, and the stop or the reaper puts them back.
        """
        mine: _Thread | None = getattr(self._local, "mine", None)
        if mine is not None:
            self._local.mine = None
            with self._lock:
                if mine.alone:
                    mine.alone = False
                    self._alone -= 1
                if mine in self._threads:
                    self._threads.remove(mine)
            mine.line.close()
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
        self._give_back(ready)

    def requeue(self, units: list[UnitOfWork]) -> None:
        """Put back the given unfinished jobs, then anything else left in our private lists.

        Processor threads acknowledge finished jobs before they exit, so whatever is
        still in a private list at this point did not finish.
        """
        moved = 0
        for unit in units:
            moved += self._move_back(self.private[unit.queue], unit.queue, unit.raw)
        for name, private in list(self.private.items()):  # a thread may learn a priority list meanwhile
            for raw in self.redis.lrange(private, 0, -1):
                moved += self._move_back(private, name, raw)
        if moved:
            logger.warning("pushed %d unfinished job(s) back from this process's private lists", moved)

    def listed(self) -> list[UnitOfWork]:
        """Every job in this process's private lists, whether a thread holds it or not."""
        known = dict(self.private)  # a thread may learn a priority list meanwhile
        pipe = self.redis.pipeline(transaction=False)
        for private in known.values():
            pipe.lrange(private, 0, -1)
        lists = zip(known, pipe.execute(), strict=True)
        return [UnitOfWork(name, raw) for name, raws in lists for raw in raws]

    def push_back(self, units: list[UnitOfWork], behind: bool = False) -> int:
        """Move these jobs from our private lists back to their queues; each only if still there."""
        return sum(self._move_back(self.private[unit.queue], unit.queue, unit.raw, behind) for unit in units)

    def _move_back(self, private: str, queue_name: str, raw: bytes, behind: bool = False) -> int:
        return int(self.scripts.requeue(private, raw, raw, queue_name, behind=behind))


def fetch_for(config: Config, redis: Redis, scripts: Scripts, identity: str) -> BasicFetch | ReliableFetch:
    if config.fetch == "basic":
        return BasicFetch(config, redis)
    return ReliableFetch(config, redis, scripts, identity)
