"""The reaper: give the jobs of dead processes back to their queues.

With reliable fetch a running job sits in its process's private list. A process that
dies (``kill -9``, the OOM killer, a lost machine) stops heartbeating; once its heartbeat
is older than ``PROCESS_DEAD_AFTER`` (or its hash has expired) the reaper moves each job in
its private lists back to the tail of its queue, so it is fetched next. One reaper works at
a time across the cluster (a Redis lease), every ``REAPER_INTERVAL`` seconds, and a
starting process reaps once before it fetches anything.

A job that keeps killing its worker would otherwise crash-loop through the fleet forever.
Each recovery is counted in the payload (``recovered``); past ``MAX_RECOVERIES`` the job
goes to the dead set with an ``error_class`` of ``WorkerDied`` saying why.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from django_wurk.core import keys, wire
from django_wurk.core.worker.fetch import UnitOfWork, seconds_since
from django_wurk.core.worker.loop import Loop
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.processor import invalid_payload_envelope

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.reaper")


class WorkerDied(RuntimeError):
    """What death handlers are told when a job is buried for killing its workers."""


RELEASE_LEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class Reaper(Loop):
    name = "reaper"

    def __init__(self, wurk: Wurk, identity: str, outage: Outage) -> None:
        super().__init__(wurk, outage)
        self.identity = identity

    def tick(self) -> None:
        self.reap()

    def interval(self) -> float:
        return self.config.reaper_interval

    def reap(self) -> int:
        """One pass over every private list; returns how many jobs were moved."""
        redis = self.wurk.redis
        # Short: a process killed while reaping must not block recovery for long. A pass that
        # outlives its lease is still safe, since every move is one atomic LREM-guarded step.
        lease = max(self.config.reaper_interval * 2, 1.0)
        if not redis.set(keys.REAPER_LOCK, self.identity, nx=True, px=int(lease * 1000)):
            return 0
        moved = 0
        try:
            for key in redis.scan_iter(match=f"{keys.PRIVATE_QUEUE_PREFIX}*", count=500):
                parsed = keys.parse_private_queue(key.decode("utf-8", "replace"))
                if parsed is None or parsed[0] == self.identity or self.alive(parsed[0]):
                    continue
                moved += self._recover(key.decode(), *parsed)
        finally:
            redis.eval(RELEASE_LEASE, 1, keys.REAPER_LOCK, self.identity)
        return moved

    def alive(self, identity: str) -> bool:
        age = seconds_since(self.wurk.redis.hget(identity, "beat"))
        return age is not None and age <= self.config.process_dead_after

    def _recover(self, private: str, identity: str, queue_name: str) -> int:
        redis = self.wurk.redis
        moved = buried = 0
        # Newest first: each RPUSH lands further right, so the oldest job ends up fetched first.
        for raw in redis.lrange(private, 0, -1):
            new, dead = self._next_life(raw, queue_name, identity)
            if dead:
                now = time.time()
                args = [
                    raw,
                    new,
                    repr(now),
                    queue_name,
                    repr(now - self.config.dead_timeout),
                    self.config.dead_max_jobs,
                ]
                ok = self.wurk.scripts.requeue(keys=[private, keys.DEAD, keys.QUEUES], args=args)
                buried += int(ok)
                if ok:
                    self._report_death(new)
            else:
                args = [raw, new, "", queue_name, "", ""]
                ok = self.wurk.scripts.requeue(keys=[private, keys.queue(queue_name), keys.QUEUES], args=args)
                moved += int(ok)
        if moved or buried:
            logger.warning(
                "recovered %d job(s) of dead process %s from queue %r (%d buried as poison)",
                moved,
                identity,
                queue_name,
                buried,
            )
        return moved + buried

    def _report_death(self, buried: str) -> None:
        """Every way into the dead set tells the death handlers (a batch waits for its jobs' fate)."""
        try:
            payload = wire.loads(buried)
        except wire.PayloadError:
            return  # an unreadable job names no batch or anything else to tell
        self.wurk.report_death(payload, WorkerDied(str(payload.get("error_message", ""))))

    def _next_life(self, raw: bytes, queue_name: str, identity: str) -> tuple[str, bool]:
        """The payload to write back, and whether it goes to the dead set instead of its queue."""
        try:
            payload = wire.loads(raw)
        except wire.PayloadError as error:
            return invalid_payload_envelope(UnitOfWork(queue_name, raw), error, self.config.timestamps), True
        count = payload.get("recovered")
        recovered = (count if isinstance(count, int) and not isinstance(count, bool) else 0) + 1
        payload["recovered"] = recovered
        if recovered <= self.config.max_recoveries:
            return wire.dumps(payload), False
        style = self.config.timestamps
        payload["error_class"] = "WorkerDied"
        payload["error_message"] = (
            f"the worker running this job died {recovered} times (last: {identity}); "
            "it is not run again automatically, so it cannot take down more workers"
        )
        if "retry_count" in payload:
            payload["retried_at"] = wire.now_stamp(style)
        else:
            payload["failed_at"] = wire.now_stamp(style)
            payload["retry_count"] = 0
        return wire.dumps(payload), True
