"""The data API of periodic jobs: the registered loops, their history, pause and enqueue-now.

It reads what the leader registered in Redis (``periodic``, ``loops:{lid}``,
``loop-history:{lid}``), so a web process with no worker in it shows the same loops as the
fleet, and any value there may be junk: a field that cannot be read shows as ``None`` (or
empty), never as an exception.

``pause()``/``unpause()`` set the loop's ``paused`` flag, which registration never
overwrites; a paused loop's occurrences are skipped (its next fire still moves on, so
unpausing never fires a stale occurrence). ``enqueue_now()`` pushes one job at once, as a
fire would, records it in the history, and leaves the schedule (``nf``) and the last
scheduled fire (``lf``) alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.engine import UnknownJobError, Wurk
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.loops import read_stamp, record_fire, server_time
from django_wurk.core.job import Setter

#: Text fields longer than this are cut when read (a hostile hash may hold megabytes).
MAX_TEXT = 1000


class LoopFire(NamedTuple):
    """One entry of a loop's history: when it fired (Redis's clock) and the job it pushed."""

    fired_at: datetime
    jid: str


def _text(raw: Any) -> str:
    return wire.display_text(raw, MAX_TEXT)


def _moment(raw: Any) -> datetime | None:
    seconds = read_stamp(raw)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


@dataclass
class Loop:
    """One registered loop, as read from ``loops:{lid}``."""

    lid: str
    #: The cron expression.
    schedule: str
    #: The job's wire name (what the payload's ``class`` will be).
    klass: str
    #: The entry's own options: ``args``, ``tz`` and, when set, ``kwargs``, ``queue`` and ``retry``.
    options: dict[str, Any]
    tz: str
    paused: bool
    #: When the last scheduled occurrence fired, by Redis's clock (None: never, or unreadable).
    last_fire: datetime | None
    #: When the next occurrence is due (None: unreadable; the leader reschedules it).
    next_fire: datetime | None
    wurk: Wurk

    @property
    def job(self) -> str:
        return self.klass

    @property
    def args(self) -> list[Any]:
        args = self.options.get("args")
        return args if isinstance(args, list) else []

    @property
    def kwargs(self) -> dict[str, Any]:
        kwargs = self.options.get("kwargs")
        return kwargs if isinstance(kwargs, dict) else {}

    @property
    def queue(self) -> str:
        """The queue a fire pushes to: the entry's, else the job class's, else ``default``."""
        queue = self.options.get("queue")
        if isinstance(queue, str) and queue:
            return queue
        job_class = self.wurk.registry.resolve(self.klass)
        return job_class.queue if job_class is not None else "default"

    @property
    def retry(self) -> Any:
        return self.options.get("retry")

    def history(self) -> list[LoopFire]:
        """The last fires (at most 25), newest first; unreadable entries are left out."""
        try:
            raw = self.wurk.redis.lrange(keys.history(self.lid), 0, keys.HISTORY_MAX - 1)
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return []
        fires: list[LoopFire] = []
        for entry in raw:
            try:
                value = wire.decode_json(entry, "loop history entry")
            except wire.PayloadError:
                continue
            if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
                at = _moment(value[0])
                if at is not None:
                    fires.append(LoopFire(at, value[1][:MAX_TEXT]))
        return fires

    def pause(self) -> bool:
        """Skip its occurrences until unpaused; False if the loop is no longer registered."""
        self.paused = self.wurk.scripts.pause_loop(keys.loop(self.lid), True) or self.paused
        return self.paused

    def unpause(self) -> bool:
        """Fire again from its next occurrence on; False if the loop is no longer registered."""
        done = self.wurk.scripts.pause_loop(keys.loop(self.lid), False)
        if done:
            self.paused = False
        return done

    def enqueue_now(self) -> str | None:
        """Push its job once, now, and record it in the history; returns the jid.

        Only a registered job class is pushed (``UnknownJobError`` otherwise), with the
        loop's options validated as any ``set(...)`` would (``ValueError``).
        """
        job_class = self.wurk.registry.resolve(self.klass)
        if job_class is None:
            raise UnknownJobError(f"periodic loop {self.lid}: no job is registered as {self.klass!r}")
        overrides: dict[str, Any] = {k: self.options[k] for k in ("queue", "retry") if k in self.options}
        args = self.options.get("args", [])
        if not isinstance(args, list):
            raise ValueError(f"periodic loop {self.lid}: its args are not a list")
        kwargs = self.options.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise ValueError(f"periodic loop {self.lid}: its kwargs are not an object")
        setter: Setter[...] = Setter(job_class, overrides)
        try:
            payload = setter.payload(args, kwargs)
        except TypeError as exc:  # arguments in Redis the job cannot take (or not JSON)
            raise ValueError(f"periodic loop {self.lid}: {exc}") from None
        jid = self.wurk.client.push(payload, delivery=setter.delivery)
        if jid is not None:
            try:
                record_fire(self.wurk.redis, self.lid, server_time(self.wurk.redis), jid)
            except ResponseError as exc:  # the job is pushed: only its history entry is lost
                if "WRONGTYPE" not in str(exc):
                    raise
        return jid


class LoopSet:
    """Every registered loop, ordered by lid. Iterating reads Redis each time."""

    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk

    def lids(self) -> list[str]:
        """The registered loop ids that can be ids at all (UTF-8 text); junk members are left out."""
        found = []
        for member in self.wurk.redis.smembers(keys.PERIODIC):
            try:
                found.append(member.decode("utf-8"))
            except UnicodeDecodeError:
                continue
        return sorted(found)

    def __iter__(self) -> Iterator[Loop]:
        lids = self.lids()
        if not lids:
            return iter([])
        pipe = self.wurk.redis.pipeline(transaction=False)
        for lid in lids:
            pipe.hgetall(keys.loop(lid))
        rows = pipe.execute(raise_on_error=False)
        loops = [self._loop(lid, row) for lid, row in zip(lids, rows, strict=True)]
        return iter([loop for loop in loops if loop is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def get(self, lid: str) -> Loop | None:
        """The loop ``lid``, or None when it is not registered (or not readable)."""
        if not self.wurk.redis.sismember(keys.PERIODIC, lid):
            return None
        try:
            row = self.wurk.redis.hgetall(keys.loop(lid))
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return None
        return self._loop(lid, row)

    def _loop(self, lid: str, row: Any) -> Loop | None:
        if not isinstance(row, dict) or not row:
            return None  # the hash is gone (pruned meanwhile) or of another type
        try:
            options = wire.decode_json(row.get(b"options") or b"{}", "loop options")
        except wire.PayloadError:
            options = {}
        if not isinstance(options, dict):
            options = {}
        return Loop(
            lid=lid,
            schedule=_text(row.get(b"schedule")),
            klass=_text(row.get(b"klass")),
            options=options,
            tz=_text(row.get(b"tz")) or "UTC",
            paused=row.get(b"paused") in (b"1", b"true"),
            last_fire=_moment(row.get(b"lf")),
            next_fire=_moment(row.get(b"nf")),
            wurk=self.wurk,
        )


def current_leader(wurk: Wurk = default_wurk) -> str | None:
    """The identity (``host:pid:nonce``) of the process leading now, or None."""
    try:
        raw = wurk.redis.get(wurk.config.leader_key)
    except ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return None
    return None if raw is None else _text(raw)


__all__ = ["Loop", "LoopFire", "LoopSet", "current_leader"]
