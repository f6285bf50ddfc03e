"""A periodic loop: which job to push, with what, on which schedule; and its registration.

A loop is identified by its ``lid``: the first 16 hex digits of the SHA-1 of the UTF-8 text
``"<schedule>|<klass>|<options>"``, where ``schedule`` is the cron expression as parsed,
``klass`` the job's wire name, and ``options`` the canonical JSON (keys sorted, no spaces,
non-ASCII kept) of the entry's own settings: ``args`` and ``tz`` always, ``kwargs``,
``queue`` and ``retry`` when the entry sets them. So an entry keeps its lid across restarts and deploys
(its pause, history and next fire with it), and any change that changes when or what it
fires (schedule, job, arguments, keyword arguments, queue, retry, time zone) makes it a new
loop; the old one
is pruned by the next leader (``prune``). The job class's own options are not part of the
lid: they are read when the job is pushed, as for any other push.

Registration writes the definition (``HSET``), and only if absent ``paused`` (``HSETNX``:
a pause from the dashboard survives every later registration) and ``nf``, the next fire,
computed from now: registering never backfills.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

from django_wurk.core import wire
from django_wurk.core.features.periodic import keys
from django_wurk.core.job import Job, Setter, call_shape, validate_options

if TYPE_CHECKING:
    from django_wurk.core.connection import Redis

logger = logging.getLogger("django_wurk.periodic")

#: The time zone of a loop that names none (see docs/periodic.md: UTC, never the host's).
DEFAULT_TZ = ZoneInfo("UTC")
#: Where an entry may override the job class's options.
OVERRIDES = ("queue", "retry")


class Schedule(Protocol):
    """What a loop needs of its schedule (``periodic.cron.Cron`` is one)."""

    @property
    def expression(self) -> str: ...

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        """The first occurrence strictly after ``moment`` (aware), as an aware UTC datetime."""
        ...


@dataclass(frozen=True)
class LoopSpec:
    """One periodic entry of this process's configuration, its job class resolved."""

    schedule: Schedule
    job_class: type[Job]
    args: tuple[Any, ...] = ()
    #: Keyword arguments for the job (the payload's ``kwargs``; docs/jobs.md).
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    retry: bool | int | None = None
    tz: ZoneInfo = DEFAULT_TZ
    #: Where the entry was written, for messages (``WURK['PERIODIC'][0]``).
    source: str = ""
    lid: str = field(init=False)
    options: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        where = self.source or f"periodic {self.job_class.wire_name}"
        overrides = validate_options(self.overrides, where)
        try:  # a loop that could never push is refused now, not at each of its fires
            call_shape(self.job_class).check(self.args, self.kwargs, True)
        except TypeError as exc:
            raise TypeError(f"{self.source}: {exc}" if self.source else str(exc)) from None
        options: dict[str, Any] = {"args": list(self.args), "tz": self.tz.key, **overrides}
        if self.kwargs:  # only when set: a loop without them keeps the lid it always had
            options["kwargs"] = dict(self.kwargs)
        object.__setattr__(self, "options", options)
        text = f"{self.expression}|{self.klass}|{canonical_json(options)}"
        object.__setattr__(self, "lid", hashlib.sha1(text.encode("utf-8")).hexdigest()[:16])

    @property
    def expression(self) -> str:
        return self.schedule.expression

    @property
    def klass(self) -> str:
        return self.job_class.wire_name

    @property
    def overrides(self) -> dict[str, Any]:
        found = {"queue": self.queue, "retry": self.retry}
        return {k: v for k, v in found.items() if v is not None}

    @property
    def label(self) -> str:
        """How logs name the loop: its source if known, its lid, job and schedule."""
        source = f"{self.source} " if self.source else ""
        return f"{source}(loop {self.lid}: {self.klass} at {self.expression!r} {self.tz.key})"

    def next_fire(self, now: float) -> float:
        """The first occurrence strictly after ``now`` (epoch seconds)."""
        moment = datetime.fromtimestamp(now, UTC)
        return self.schedule.next_after(moment, self.tz).timestamp()

    def payload(self) -> wire.Payload:
        """What one fire pushes: the job class's options, the entry's overrides and args."""
        return Setter(self.job_class, self.overrides).payload(self.args, self.kwargs)

    def delivery(self) -> dict[str, Any]:
        """How one fire is delivered: the job class's shard, so a leader on one shard fires
        jobs onto any."""
        return Setter(self.job_class, self.overrides).delivery


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def format_stamp(seconds: float) -> str:
    """Epoch seconds as stored in ``nf``/``lf``: whole seconds without a fraction."""
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def read_stamp(raw: Any) -> float | None:
    """A stored ``nf``/``lf`` (or a fired-at in history), or None for anything that is not a
    plausible epoch time: junk, NaN, infinities, negative or past year 5000."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    try:
        seconds = float(raw)
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds < 95_617_584_000 else None


def register(redis: Redis, spec: LoopSpec, now: float) -> None:
    """Write the loop's definition; keep its pause and next fire if it has them."""
    key = keys.loop(spec.lid)
    pipe = redis.pipeline(transaction=True)
    pipe.hset(
        key,
        mapping={
            "schedule": spec.expression,
            "klass": spec.klass,
            "options": canonical_json(spec.options),
            "tz": spec.tz.key,
        },
    )
    pipe.hsetnx(key, "paused", "0")
    pipe.hsetnx(key, "nf", format_stamp(spec.next_fire(now)))
    pipe.sadd(keys.PERIODIC, spec.lid)
    pipe.execute()


def prune(redis: Redis, keep: Iterable[str]) -> list[bytes]:
    """Forget every registered loop not in ``keep`` (its hash and history too); returns them."""
    kept = {lid.encode() for lid in keep}
    gone = [lid for lid in redis.smembers(keys.PERIODIC) if lid not in kept]
    if gone:
        pipe = redis.pipeline(transaction=True)
        for lid in gone:
            pipe.srem(keys.PERIODIC, lid)
            pipe.delete(keys.loop(lid), keys.history(lid))
        pipe.execute()
    return gone


def record_fire(redis: Redis, lid: str | bytes, fired_at: float, jid: str) -> None:
    """Put a fire at the head of the loop's history, trimmed to ``HISTORY_MAX``."""
    key = keys.history(lid)
    pipe = redis.pipeline(transaction=True)
    pipe.lpush(key, wire.dumps([fired_at, jid]))
    pipe.ltrim(key, 0, keys.HISTORY_MAX - 1)
    pipe.execute()


def server_time(redis: Redis) -> float:
    """Redis's clock, the one every process of the fleet agrees on."""
    seconds, micros = redis.time()
    return float(seconds) + float(micros) / 1_000_000


def unique(specs: Sequence[LoopSpec]) -> list[LoopSpec]:
    """The specs without repeats: two identical entries are one loop (they share a lid)."""
    seen: dict[str, LoopSpec] = {}
    for spec in specs:
        seen.setdefault(spec.lid, spec)
    return list(seen.values())
