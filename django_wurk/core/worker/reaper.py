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

A job that cannot be decoded or written back goes to the dead set as its exact bytes with
the reason, in the same atomic step that takes it out of the private list; and a list that
cannot be recovered at all is reported and left for the next pass, so no poison stops the
recovery of every other dead process's jobs.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from django_wurk.core import keys, wire
from django_wurk.core.dead_set import invalid_payload_envelope
from django_wurk.core.lease import Lease
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.routine import Routine

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.reaper")


class WorkerDied(RuntimeError):
    """What death handlers are told when a job is buried for killing its workers."""


def raw(name: str) -> bytes:
    """A name read from Redis (surrogate escapes for bytes that are not UTF-8) as its bytes."""
    return name.encode("utf-8", "surrogateescape")


def shown(name: str | bytes) -> str:
    """A name read from Redis as text that can be logged and written into a payload."""
    return (raw(name) if isinstance(name, str) else name).decode("utf-8", "replace")


class Reaper(Routine):
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
        lease = Lease(
            self.wurk.scripts, keys.REAPER_LOCK, self.identity, max(self.config.reaper_interval * 2, 1.0)
        )
        if not lease.acquire():
            return 0
        moved = 0
        try:
            # Lists only: a key that merely looks like a private list is not ours to read.
            for key in redis.scan_iter(match=f"{keys.PRIVATE_QUEUE_PREFIX}*", count=500, _type="list"):
                # A name that is not UTF-8 (a Ruby process on a host whose name is not) still
                # holds jobs: its parts are kept as surrogate escapes and written back as bytes.
                parsed = keys.parse_private_queue(key.decode("utf-8", "surrogateescape"))
                if parsed is None or parsed[0] == self.identity:
                    continue
                try:
                    if not self.alive(parsed[0]):
                        moved += self._recover(key, *parsed)
                except ResponseError as exc:
                    if "WRONGTYPE" not in str(exc):
                        raise
                    # The key changed type since the scan: not a private list any more.
                    logger.warning("skipping %r: %s", key, exc)
                except RedisError:
                    raise
                except Exception as exc:  # a bug met on one list must not strand every other one
                    logger.exception("could not recover the jobs in %r", key)
                    self.wurk.report_error(exc, {"context": "reaper", "private_list": shown(key)})
        finally:
            lease.release()
        return moved

    def alive(self, identity: str) -> bool:
        try:
            beat = self.wurk.redis.hget(raw(identity), "beat")
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return False  # its key is not a process hash (a list, a string): nothing beats there
        age = seconds_since(beat)
        # A beat of "nan" or "inf" is no sign of life (and "inf" would otherwise look alive forever).
        return age is not None and math.isfinite(age) and age <= self.config.process_dead_after

    def _recover(self, private: bytes, identity: str, queue_name: str) -> int:
        moved = buried = 0
        # Text written into payloads and logs: a name that is not UTF-8 is shown, not encoded.
        identity, queue_shown = shown(identity), shown(queue_name)
        # Newest first: each RPUSH lands further right, so the oldest job ends up fetched first.
        for member in self.wurk.redis.lrange(private, 0, -1):
            new, dead = self._next_life(member, queue_shown, identity)
            if not dead:
                try:
                    moved += int(self.wurk.scripts.requeue(private, member, new, raw(queue_name)))
                    continue
                except ResponseError as exc:  # the queue's key is not a list: nothing was moved
                    if "WRONGTYPE" not in str(exc):
                        raise
                    error = wire.PayloadError(
                        "InvalidPayload", f"it could not be put back on its queue ({exc})"
                    )
                    logger.error("burying a job of dead process %s: %s", identity, error)
                    new = invalid_payload_envelope(queue_shown, member, error, self.config.timestamps)
            buried += self._bury(private, member, new, raw(queue_name))
        if moved or buried:
            logger.warning(
                "recovered %d job(s) of dead process %s from queue %r (%d buried as poison)",
                moved,
                identity,
                queue_shown,
                buried,
            )
        return moved + buried

    def _bury(self, private: bytes, member: bytes, payload: str, queue_name: bytes) -> int:
        now = time.time()
        config = self.config
        buried = int(
            self.wurk.scripts.bury_fetched(
                private, member, payload, queue_name, now, now - config.dead_timeout, config.dead_max_jobs
            )
        )
        if buried:
            self._report_death(payload)
        return buried

    def _report_death(self, buried: str) -> None:
        """Every way into the dead set tells the death handlers (a batch waits for its jobs' fate)."""
        try:
            payload = wire.loads(buried)
        except wire.PayloadError:
            return  # an unreadable job names no batch or anything else to tell
        self.wurk.report_death(payload, WorkerDied(str(payload.get("error_message", ""))))

    def _next_life(self, raw: bytes, queue_name: str, identity: str) -> tuple[str, bool]:
        """The payload to write back, and whether it goes to the dead set instead of its queue.

        A payload that cannot be decoded or encoded again is buried as its original bytes.
        """
        try:
            return self._rewrite(raw, identity)
        except Exception as exc:
            error = (
                exc
                if isinstance(exc, wire.PayloadError)
                else wire.PayloadError(
                    "InvalidPayload",
                    f"it could not be recovered ({type(exc).__name__}: {wire.error_message(exc)})",
                )
            )
            logger.error("burying a job of dead process %s from queue %r: %s", identity, queue_name, error)
            return invalid_payload_envelope(queue_name, raw, error, self.config.timestamps), True

    def _rewrite(self, raw: bytes, identity: str) -> tuple[str, bool]:
        payload = wire.loads(raw)
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


def seconds_since(beat: bytes | None) -> float | None:
    """Age of a heartbeat's ``beat`` field; None when there is none or it is not a number."""
    try:
        return time.time() - float(beat) if beat is not None else None
    except ValueError:
        return None
