"""The data API: read and change what is in Redis, as Sidekiq's ``Sidekiq::*`` API does.

``Stats``, ``Queue``, ``ScheduledSet``, ``RetrySet``, ``DeadSet``, ``ProcessSet`` and
``Workers`` read the same keys as Sidekiq's Web UI, so they report Ruby and Python
processes alike. Entries keep the exact bytes read from Redis: removing one (LREM/ZREM)
needs them, and an entry we cannot decode is still listed, deletable and killable.

Every method that moves an entry says whether it found it, so a caller (the dashboard)
can report "that job is gone" instead of failing.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from redis.exceptions import ResponseError

from django_wurk.core import activejob, keys, priority, wire
from django_wurk.core.dead_set import bury, bury_members
from django_wurk.core.engine import Wurk
from django_wurk.core.engine import wurk as default_wurk

PAGE = 100
#: How many entries a bulk action ("retry all", "kill all") reads, and moves, per round trip.
CHUNK = 500
#: Members one ZSCAN call looks at in a search. A search reads the whole set whatever this is
#: (O(n), in Redis); fewer, larger calls halve its time at 100,000 entries (200 round trips
#: at 500, 50 at 2,000), while one call still holds Redis for only a few milliseconds.
SCAN_COUNT = 2000


class KilledByAPI(RuntimeError):
    """What the death handlers are told when someone kills a job by hand (the data API, the
    dashboard), with Sidekiq's message; its own class so a handler can tell such a kill from
    a job the worker let die (unique jobs keep their lock on a kill, as Sidekiq Enterprise does)."""


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=16).digest()


def _mark(raw: bytes, score: float) -> int:
    """One sorted-set entry at one score, in 64 bits (see ``SortedSet._snapshot``): the same
    bytes moved to another score are another entry."""
    mark = hashlib.blake2b(struct.pack("<d", score), digest_size=8)
    mark.update(raw)
    return int.from_bytes(mark.digest(), "little")


def _writable(payload: wire.Payload) -> bool:
    """Whether the payload can be written back as it is: an entry that decodes but cannot be
    encoded again (NaN, a lone surrogate, nesting too deep) is left where it is, like an
    unreadable one, instead of failing the action halfway."""
    try:
        wire.dumps(payload).encode("utf-8")
    except (ValueError, RecursionError):
        return False
    return True


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


#: Larger magnitudes are not counts or times anyone wrote on purpose (Redis integers are 64-bit).
_LIMIT = 2**63


def _number(value: Any) -> float | None:
    """A finite number from a Redis field or a decoded JSON value; ``None`` for anything else.

    What other clients, versions or hand-typed commands leave in Redis is read, never
    trusted: "abc", "NaN", ``-Infinity``, a 400-digit integer or a list where a number goes
    reads as missing, so a page shows "—" instead of failing.
    """
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return float(value) if -_LIMIT < value < _LIMIT else None
    if isinstance(value, str):
        try:
            value = float(value.strip()) if len(value) <= 64 else None
        except ValueError:
            return None
    if not isinstance(value, float) or not math.isfinite(value) or abs(value) >= _LIMIT:
        return None
    return value


def _int(value: Any, default: int = 0) -> int:
    number = _number(value)
    return int(number) if number is not None else default


def _float(value: Any, default: float = 0.0) -> float:
    number = _number(value)
    return number if number is not None else default


def _stamp(value: Any) -> float | None:
    """A job timestamp as finite epoch seconds, or ``None`` (see ``wire.read_stamp``)."""
    if isinstance(value, str):
        value = _number(value)
    elif isinstance(value, int) and not isinstance(value, bool) and not -_LIMIT < value < _LIMIT:
        return None
    try:
        seconds = wire.read_stamp(value)
    except (OverflowError, ValueError):
        return None
    return seconds if seconds is not None and math.isfinite(seconds) else None


def _as_text(value: Any) -> str:
    """A payload field shown as text, whatever its type (``None`` is empty)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return str(value)
    except (RecursionError, ValueError):  # nested too deeply; an int too long to print
        return "(cannot be shown)"


def _info_text(value: Any) -> str:
    """A heartbeat's text field: strings (and numbers) as they are, anything else as missing."""
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def _info_list(value: Any) -> list[str]:
    """A heartbeat's list of names (queues, labels); anything that is not a list is empty."""
    return [t for t in (_info_text(v) for v in value) if t] if isinstance(value, list) else []


def _payload_bytes(payload: Any) -> bytes:
    """A busy-work entry's payload (a JSON string, or an object from old versions) as bytes.

    Bytes that cannot be what the job runs (a lone surrogate, NaN) come out as such, so
    the record says "unreadable" instead of failing the page.
    """
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")
    try:
        return wire.dumps(payload).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        return b""


def _replies(pipe: Any) -> list[Any]:
    """A pipeline's replies, where a key holding another type than the command reads reads as
    ``None``: a process or busy-work key no worker wrote (a list, a string) is one nobody beats
    on, so it is skipped like an expired one instead of failing every page that lists processes.
    Any other error reply is raised."""
    out = []
    for reply in pipe.execute(raise_on_error=False):
        if isinstance(reply, ResponseError):
            if not str(reply).startswith("WRONGTYPE"):
                raise reply
            reply = None
        out.append(reply)
    return out


def _decode_object(raw: bytes | str) -> dict[str, Any] | None:
    """A JSON object (heartbeat info, a busy-work entry), or ``None`` if it is anything else."""
    try:
        return wire.loads_object(raw)
    except (ValueError, RecursionError):
        return None


class JobRecord:
    """One job as stored: ``raw`` bytes plus the decoded payload (``None`` if unreadable)."""

    def __init__(self, raw: bytes, queue: str | None = None) -> None:
        self.raw = raw
        self.payload: wire.Payload | None = None
        self.error: str | None = None
        try:
            self.payload = wire.loads(raw)
        except wire.PayloadError as exc:
            self.error = str(exc)
        except RecursionError:
            self.error = "payload is not valid JSON: nested too deeply"
        except ValueError as exc:  # PayloadError is one; anything else the decoder raises too
            self.error = f"payload is not valid JSON: {exc}"
        self._queue = queue

    def get(self, key: str, default: Any = None) -> Any:
        return self.payload.get(key, default) if self.payload is not None else default

    @property
    def jid(self) -> str:
        return _as_text(self.get("jid"))

    @property
    def job_class(self) -> str:
        """The class a person cares about (ActiveJob's ``wrapped`` rather than the wrapper)."""
        return wire.job_display_class(self.payload) if self.payload is not None else "(unreadable payload)"

    @property
    def queue(self) -> str:
        return self._queue or _as_text(self.get("queue"))

    @property
    def args(self) -> list[Any]:
        args = self.get("args", [])
        return args if isinstance(args, list) else []

    @property
    def display_args(self) -> list[Any]:
        """Arguments as the job sees them: ActiveJob's ``arguments``, without ``_aj_*`` markers."""
        args = self.args
        if self.payload is not None and activejob.job_data(self.payload) is not None:
            try:
                positional, keywords = activejob.arguments(self.payload)
            except (ValueError, RecursionError):
                return args
            return [*positional, keywords] if keywords else positional
        if self.get("encrypt") and args:
            return [*args[:-1], "[encrypted data]"]
        return args

    @property
    def enqueued_at(self) -> float | None:
        return _stamp(self.get("enqueued_at"))

    @property
    def created_at(self) -> float | None:
        return _stamp(self.get("created_at"))

    @property
    def failed_at(self) -> float | None:
        return _stamp(self.get("failed_at"))

    @property
    def retried_at(self) -> float | None:
        return _stamp(self.get("retried_at"))

    @property
    def error_class(self) -> str:
        return _as_text(self.get("error_class"))

    @property
    def error_message(self) -> str:
        return _as_text(self.get("error_message"))

    @property
    def backtrace(self) -> list[str]:
        try:
            return wire.decode_backtrace(self.get("error_backtrace"))
        except RecursionError:
            return []

    @property
    def tags(self) -> list[str]:
        tags = self.get("tags", [])
        return [_as_text(t) for t in tags] if isinstance(tags, list) else []

    @property
    def latency(self) -> float:
        stamp = self.enqueued_at or self.created_at
        return min(max(time.time() - stamp, 0.0), float(_LIMIT)) if stamp else 0.0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.job_class} jid={self.jid}>"


#: A jid JSON can only write as itself or with ``\u`` escapes (see ``Queue.find_job``).
_PLAIN_JID = re.compile(r"[A-Za-z0-9_-]+")


def _name_bytes(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode("utf-8")


def _queue_key(name: bytes) -> str | bytes:
    """``queue:<name>``: text for a UTF-8 name (as everywhere else), else the exact bytes."""
    try:
        return keys.queue(name.decode("utf-8"))
    except UnicodeDecodeError:
        return b"queue:" + name


def _queue_lists(redis: Any) -> dict[bytes, list[bytes]]:
    """Every queue in the ``queues`` set with its lists (``priority.group``)."""
    return priority.group(m for m in redis.smembers(keys.QUEUES) if isinstance(m, bytes))


class Queue:
    """One queue. ``name`` may be the exact bytes from the ``queues`` set: any client can write a
    name that is not UTF-8, and only those bytes name its list (the text ``name`` then shows it
    with replacement characters).

    A queue whose jobs have priorities is several lists, its own and ``<name>@<priority>``
    ones (``core/priority.py``): it is read as one queue (its size is theirs together, its
    latency the oldest job's, its jobs are listed from the last to run), and ``lists`` names
    them. Its own list is ``key``.
    """

    def __init__(
        self, name: str | bytes = "default", wurk: Wurk = default_wurk, lists: Sequence[bytes] | None = None
    ) -> None:
        self.raw_name = _name_bytes(name)
        self.name = _text(name)
        self.wurk = wurk
        self.key = _queue_key(self.raw_name)
        self._lists = list(lists) if lists is not None else None

    @classmethod
    def all(cls, wurk: Wurk = default_wurk) -> list[Queue]:
        found = _queue_lists(wurk.redis)
        names = sorted(found, key=lambda n: (_text(n), n))
        return [cls(n, wurk, found[n]) for n in names]

    @property
    def lists(self) -> list[bytes]:
        """The names of this queue's lists in fetch order (highest priority first); read from
        the ``queues`` set once per ``Queue``."""
        if self._lists is None:
            self._lists = _queue_lists(self.wurk.redis).get(self.raw_name) or [self.raw_name]
        return self._lists

    def _keys(self, last_first: bool = False) -> list[str | bytes]:
        """The keys of ``lists``; ``last_first``: the list whose jobs run last first."""
        names = self.lists[::-1] if last_first else self.lists
        return [self.key if name == self.raw_name else _queue_key(name) for name in names]

    def size(self) -> int:
        if len(self.lists) == 1:
            return int(self.wurk.redis.llen(self.key))
        pipe = self.wurk.redis.pipeline(transaction=False)
        for key in self._keys():
            pipe.llen(key)
        return sum(int(n) for n in pipe.execute())

    def latency(self) -> float:
        """Age in seconds of the oldest job (of any priority); 0.0 when empty."""
        if len(self.lists) == 1:
            raw = self.wurk.redis.lindex(self.key, -1)
            return JobRecord(raw, self.name).latency if raw is not None else 0.0
        pipe = self.wurk.redis.pipeline(transaction=False)
        for key in self._keys():
            pipe.lindex(key, -1)
        ages = [JobRecord(raw, self.name).latency for raw in pipe.execute() if raw is not None]
        return max(ages, default=0.0)

    def paused(self) -> bool:
        return bool(self.wurk.redis.sismember(keys.PAUSED, self.raw_name))

    def known(self) -> bool:
        """Whether Redis knows this queue: in the ``queues`` set, paused, or holding jobs.

        A name nobody has pushed to or paused is not a queue, just a name; a page for it
        would offer to pause a queue that does not exist.
        """
        pipe = self.wurk.redis.pipeline(transaction=False)
        pipe.sismember(keys.QUEUES, self.raw_name)
        pipe.sismember(keys.PAUSED, self.raw_name)
        pipe.exists(self.key)
        return any(pipe.execute()) or len(self.lists) > 1  # or jobs of other priorities only

    def pause(self) -> bool:
        """Stop workers fetching from this queue (Sidekiq Pro's ``pause!``: the ``paused`` set).

        Jobs stay queued and pushes still land; workers notice within about two seconds
        (``worker.fetch.PAUSED_REFRESH``), and a Sidekiq Pro fleet sharing the Redis
        honours the same set. True if the queue was not paused before.
        """
        return bool(self.wurk.redis.sadd(keys.PAUSED, self.raw_name))

    def unpause(self) -> bool:
        """Let workers fetch from this queue again; True if it was paused."""
        return bool(self.wurk.redis.srem(keys.PAUSED, self.raw_name))

    def page(self, start: int = 0, count: int = 25) -> list[JobRecord]:
        """Jobs from the head (newest) onwards; with priorities, the last to run first."""
        if len(self.lists) == 1:
            raws = self.wurk.redis.lrange(self.key, start, start + count - 1)
            return [JobRecord(raw, self.name) for raw in raws]
        out: list[JobRecord] = []
        list_keys = self._keys(last_first=True)
        pipe = self.wurk.redis.pipeline(transaction=False)
        for key in list_keys:
            pipe.llen(key)
        for key, size in zip(list_keys, pipe.execute(), strict=True):
            if len(out) >= count:
                break
            if start >= size:
                start -= size
                continue
            raws = self.wurk.redis.lrange(key, start, start + count - len(out) - 1)
            out += (JobRecord(raw, self.name) for raw in raws)
            start = 0
        return out

    def __iter__(self) -> Iterator[JobRecord]:
        """Newest first; safe while jobs are deleted behind the cursor, as Sidekiq's ``Queue#each``."""
        for raw in self.raw_jobs():
            yield JobRecord(raw, self.name)

    def raw_jobs(self, page: int = PAGE) -> Iterator[bytes]:
        """Every job's exact bytes, newest first (with priorities, list by list, the last to run
        first), as ``__iter__`` reads them (``_raw_jobs``)."""
        if len(self.lists) == 1:
            yield from self._raw_jobs(self.key, page)
            return
        for key in self._keys(last_first=True):
            yield from self._raw_jobs(key, page)

    def _raw_jobs(self, key: str | bytes, page: int) -> Iterator[bytes]:
        """Every job's exact bytes, newest first, read ``page`` at a time, as ``__iter__`` reads
        them; for a search that needs only the bytes (the dashboard's delete looks for a
        digest), without decoding each job. Each read is an LRANGE at an offset, which
        Redis reaches from the nearer end of the list, skipping whole list nodes: O(n / page)
        round trips, and O(offset) steps for each inside Redis."""
        redis = self.wurk.redis
        initial = int(redis.llen(key))
        yielded = 0
        while True:
            shrunk = max(initial - int(redis.llen(key)), 0)
            start = max(yielded - shrunk, 0)
            raws = redis.lrange(key, start, start + page - 1)
            yield from raws
            if len(raws) < page:
                return
            yielded += len(raws)

    def find_job(self, jid: str) -> JobRecord | None:
        """The job with this jid, looked for from the head: O(n), as Sidekiq's ``Queue#find_job``.

        Only jobs whose bytes can hold the jid are decoded. A jid of letters, digits, ``-``
        and ``_`` (what clients write) can appear in JSON as itself or through ``\\u``
        escapes, so a job with neither cannot be it; any other jid is compared on every job.
        """
        plain = _PLAIN_JID.fullmatch(jid) is not None
        needle = jid.encode("ascii") if plain else b""
        for raw in self.raw_jobs(page=1000):
            if plain and needle not in raw and b"\\u" not in raw:
                continue
            record = JobRecord(raw, self.name)
            if record.jid == jid:
                return record
        return None

    def delete_job(self, record: JobRecord) -> bool:
        return any(self.wurk.redis.lrem(key, 1, record.raw) for key in self._keys())

    def clear(self) -> None:
        """Delete every job of the queue, of every priority, and forget its lists."""
        pipe = self.wurk.redis.pipeline(transaction=True)
        pipe.unlink(*self._keys())
        pipe.srem(keys.QUEUES, *self.lists)
        pipe.execute()


#: Stands for the jid in the key of an entry that has none, followed by a digest of its bytes.
NO_JID = "raw:"


class SortedEntry(JobRecord):
    """A job in the schedule, retry or dead set, addressed by ``<score>-<jid>``."""

    def __init__(self, raw: bytes, score: float, parent: SortedSet) -> None:
        super().__init__(raw)
        self.score = score
        self.parent = parent

    @property
    def at(self) -> float:
        return self.score

    @property
    def key(self) -> str:
        """How Sidekiq's Web UI addresses an entry: the score as Ruby prints it, a dash, the jid.

        An entry without a jid (unreadable, or a payload with none) has a digest of its exact
        bytes in its place (``NO_JID``), so two of them at one score each have a key that
        ``find`` takes back to that very entry.
        """
        return f"{self.score!r}-{self.key_id}"

    @property
    def key_id(self) -> str:
        """The part of ``key`` after the score."""
        return self.jid or NO_JID + _digest(self.raw).hex()

    def delete(self) -> bool:
        return bool(self.parent.wurk.redis.zrem(self.parent.name, self.raw))

    def add_to_queue(self) -> bool:
        """Push it onto its queue now, unchanged (a scheduled job's "Add to queue")."""
        payload = self._requeued(retry=False)
        return self._promote(payload) if payload is not None else False

    def _requeued(self, retry: bool) -> wire.Payload | None:
        """What "Retry now" (``retry``) or "Add to queue" pushes, before the client middleware;
        ``None`` when the entry cannot be written back, so it stays where it is."""
        if self.payload is None or not _writable(self.payload):
            return None
        payload = dict(self.payload)
        if retry and isinstance(payload.get("retry_count"), int):
            payload["retry_count"] -= 1
        return payload

    def _promote(self, payload: wire.Payload) -> bool:
        """False, leaving the entry where it is, when its ``queue`` names no queue (a list...)."""
        try:
            return self.parent.wurk.client.promote(self.parent.name, self.raw, payload)
        except wire.PayloadError:
            return False

    def retry(self) -> bool:
        """ "Retry now": back onto its queue with ``retry_count`` lowered by one, as Sidekiq does,
        so the retry does not use up an attempt."""
        payload = self._requeued(retry=True)
        return self._promote(payload) if payload is not None else False

    def kill(self) -> bool:
        """Move to the dead set (unchanged) and tell the death handlers."""
        wurk = self.parent.wurk
        if self.parent.name == keys.DEAD:
            return False
        moved = bury(wurk, self.raw, source=self.parent.name, member=self.raw)
        if moved and self.payload is not None:
            wurk.report_death(self.payload, KilledByAPI("Job killed by API"))
        return moved

    def reschedule(self, at: float) -> bool:
        """Move the entry to another time; False if it has gone."""
        pipe = self.parent.wurk.redis.pipeline(transaction=True)
        pipe.zadd(self.parent.name, {self.raw: at}, xx=True)
        pipe.zscore(self.parent.name, self.raw)
        return pipe.execute()[1] is not None


#: A score as Python's ``repr`` or Ruby's ``Float#to_s`` prints it ("1795966991.5853264",
#: "-1.5", "1e-07", "1.0e+20", "inf", "-Infinity"); ASCII digits only, never NaN.
_SCORE = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|(?i:inf(?:inity)?))")


def split_entry_key(value: str) -> tuple[float, str]:
    """``"<score>-<jid>"`` -> (score, jid), the jid possibly empty; ``ValueError`` on anything else.

    The score is read as the longest number at the start, so negative scores ("-5.5-<jid>"),
    exponents ("1e-07-<jid>") and jids with dashes all read back as they were written: a
    printed float never ends in a character a dash could extend.
    """
    match = _SCORE.match(value)
    if match is None or value[match.end() : match.end() + 1] != "-":
        raise ValueError(f"{value!r} is not an entry key of the form <score>-<jid>")
    text = match.group()
    score = float(text)
    if math.isinf(score) and "inf" not in text.lower():
        raise ValueError(f"{value!r} has a score out of range")  # "1e999": no score prints so
    return score, value[match.end() + 1 :]


def parse_entry_key(value: str) -> tuple[float, str]:
    """``"<score>-<jid>"`` -> (score, jid); ``ValueError`` on anything else (an empty jid too)."""
    score, jid = split_entry_key(value)
    if not jid:
        raise ValueError(f"{value!r} is not an entry key of the form <score>-<jid>")
    return score, jid


#: ``progress(seen, total)``: how far a bulk action over a set has got (a command line's bar).
Progress = Callable[[int, int], None]


class SortedSet:
    name = ""

    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk

    def size(self) -> int:
        return int(self.wurk.redis.zcard(self.name))

    def page(
        self, start: int = 0, count: int = 25, newest_first: bool = False
    ) -> tuple[int, list[SortedEntry]]:
        """(total size, one page of entries), read in one MULTI like the Web UI."""
        pipe = self.wurk.redis.pipeline(transaction=True)
        pipe.zcard(self.name)
        pipe.zrange(self.name, start, start + count - 1, desc=newest_first, withscores=True)
        total, rows = pipe.execute()
        return int(total), [SortedEntry(raw, score, self) for raw, score in rows]

    def __iter__(self) -> Iterator[SortedEntry]:
        return self.iterate()

    def iterate(self, newest_first: bool = False) -> Iterator[SortedEntry]:
        """Every entry, paged; safe while entries are removed behind the cursor (each page
        starts as many places earlier as the set has shrunk, as Sidekiq's ``JobSet#each`` does)."""
        initial = self.size()
        yielded = 0
        while True:
            shrunk = max(initial - self.size(), 0)
            _, page = self.page(max(yielded - shrunk, 0), PAGE, newest_first)
            yield from page
            if len(page) < PAGE:
                return
            yielded += len(page)

    def scan(self, match: str) -> Iterator[SortedEntry]:
        """Entries whose JSON contains ``match`` (Redis ZSCAN, so it never loads the whole set)."""
        pattern = "*" + "".join("\\" + c if c in "*?[]\\" else c for c in match) + "*"
        for raw, score in self.wurk.redis.zscan_iter(self.name, match=pattern, count=SCAN_COUNT):
            yield SortedEntry(raw, score, self)

    def fetch(self, score: float, jid: str | None = None) -> list[SortedEntry]:
        rows = self.wurk.redis.zrangebyscore(self.name, score, score, withscores=True)
        entries = [SortedEntry(raw, s, self) for raw, s in rows]
        return [e for e in entries if jid is None or e.jid == jid]

    def find(self, entry_key: str) -> SortedEntry | None:
        """The entry a ``<score>-<jid>`` key (``SortedEntry.key``) names, or ``None`` if it has gone."""
        score, wanted = parse_entry_key(entry_key)
        return next((e for e in self.fetch(score) if e.key_id == wanted), None)

    def find_job(self, jid: str) -> SortedEntry | None:
        return next(iter(e for e in self.scan(jid) if e.jid == jid), None)

    def delete(self, entry_key: str) -> bool:
        entry = self.find(entry_key)
        return entry.delete() if entry else False

    def clear(self) -> None:
        self.wurk.redis.unlink(self.name)

    def clear_all(self) -> int:
        """Delete every entry; returns how many there were (counted in the same MULTI)."""
        pipe = self.wurk.redis.pipeline(transaction=True)
        pipe.zcard(self.name)
        pipe.unlink(self.name)
        return int(pipe.execute()[0])

    def _snapshot(self) -> set[int]:
        """Who is in the set now: each member's ``_mark`` (its bytes and score, in 64 bits).

        ZSCAN returns every member present for the whole scan, and the scan finishes before a
        bulk action changes anything, so an entry the action itself causes (a retried job
        failing again, a kill's death handler scheduling a new one) is never in it. Marks
        rather than members keep the snapshot of a large set small: about 80 bytes an entry,
        never its payload.
        """
        return {_mark(raw, score) for raw, score in self.wurk.redis.zscan_iter(self.name, count=1000)}

    def _chunks(self, wanted: set[int]) -> Iterator[list[SortedEntry]]:
        """The entries of ``wanted`` still in the set, oldest first, about ``CHUNK`` at a time.

        Each read starts at a score: the lowest one not done yet. A full read (one entry more
        than a chunk) leaves out its last score, whose entries may go on past it, and the next
        read starts there; so no offset is kept that entries moving meanwhile could shift,
        and entries added behind the cursor are never read. Each entry is taken once (its
        mark leaves ``wanted``), and reading stops once every entry of the snapshot is met.
        """
        redis = self.wurk.redis
        low = "-inf"
        while wanted:
            rows = redis.zrangebyscore(self.name, low, "+inf", start=0, num=CHUNK + 1, withscores=True)
            full = len(rows) > CHUNK
            if full:
                top = rows[-1][1]
                rows = [row for row in rows if row[1] < top]
                if not rows:  # CHUNK entries or more share one score
                    yield from self._group(top, wanted)
                    low = f"({top!r}"
                    continue
                low = repr(top)
            batch = self._taken(rows, wanted)
            if batch:
                yield batch
            if not full:
                return

    def _taken(self, rows: list[tuple[bytes, float]], wanted: set[int]) -> list[SortedEntry]:
        """The rows of the snapshot not taken yet, each now marked as taken."""
        batch = []
        for raw, score in rows:
            mark = _mark(raw, score)
            if mark in wanted:
                wanted.discard(mark)
                batch.append(SortedEntry(raw, score, self))
        return batch

    def _group(self, score: float, wanted: set[int]) -> Iterator[list[SortedEntry]]:
        """The entries at one score, ``CHUNK`` at a time (any number of entries can share one).

        Within a score the set orders by member; after each chunk is acted on, the ones still
        there are counted and skipped by the next read. An entry someone else adds or removes
        at this very score meanwhile can shift that: one may then be left for later (never
        taken twice: its mark is gone from ``wanted``).
        """
        redis = self.wurk.redis
        stayed = 0
        while wanted:
            rows = redis.zrangebyscore(self.name, score, score, start=stayed, num=CHUNK, withscores=True)
            batch = self._taken(rows, wanted)
            if batch:
                yield batch
            if len(rows) < CHUNK:
                return
            pipe = redis.pipeline(transaction=False)
            for raw, _ in rows:
                pipe.zscore(self.name, raw)
            stayed += sum(1 for s in pipe.execute() if s == score)

    def _drain(self, act: str, progress: Progress | None = None) -> int:
        """Apply ``act`` to each entry present when it starts, once, oldest first.

        A pass that re-reads the set from its start takes entries added meanwhile too: a
        dead-set "Retry all" with workers running took the jobs that failed again and were
        buried with a new score, and ran them again (and again). So the entries are the
        snapshot's (``_snapshot``), read a chunk at a time (``_chunks``), and each chunk is
        acted on in one round trip of atomic moves: an entry someone else moved meanwhile
        is skipped. Entries that cannot be acted on (unreadable) stay. Memory is the
        snapshot's marks plus one chunk of entries, whatever the size of the set.
        """
        wanted = self._snapshot()
        total, seen, done = len(wanted), 0, 0
        for batch in self._chunks(wanted):
            done += self._kill_each(batch) if act == "kill" else self._requeue_each(batch, act == "retry")
            seen += len(batch)
            if progress is not None:
                progress(seen, total)
        return done

    def _requeue_each(self, batch: list[SortedEntry], retry: bool) -> int:
        """ "Retry now" (or "Add to queue") each entry; how many went onto their queue."""
        client = self.wurk.client
        moves = []
        for entry in batch:
            payload = entry._requeued(retry)
            if payload is not None:
                moves.append((entry.raw, payload, client.promotion(payload)))
        done = 0
        error: Exception | None = None
        for reply in client.move_each(self.name, moves):
            if isinstance(reply, wire.PayloadError):
                continue  # its queue names no queue: left where it is, as ``retry`` leaves it
            if isinstance(reply, Exception):
                error = error or reply
            elif reply:
                done += 1
        if error is not None:
            raise error  # after the rest of the chunk: each of those moves happened
        return done

    def _kill_each(self, batch: list[SortedEntry]) -> int:
        """Move each entry to the dead set unchanged and tell the death handlers."""
        done = 0
        error: Exception | None = None
        for entry, moved in zip(
            batch, bury_members(self.wurk, self.name, [e.raw for e in batch]), strict=True
        ):
            if isinstance(moved, Exception):
                error = error or moved
            elif moved:
                done += 1
                if entry.payload is not None:
                    self.wurk.report_death(entry.payload, KilledByAPI("Job killed by API"))
        if error is not None:
            raise error
        return done

    def retry_all(self, progress: Progress | None = None) -> int:
        """ "Retry now" every entry there now; ``progress(seen, total)`` after each chunk."""
        return self._drain("retry", progress)

    def kill_all(self, progress: Progress | None = None) -> int:
        if self.name == keys.DEAD:
            return 0  # killing a dead job does nothing (``SortedEntry.kill``)
        return self._drain("kill", progress)


class ScheduledSet(SortedSet):
    name = keys.SCHEDULE

    def add_all_to_queue(self) -> int:
        return self._drain("add_to_queue")


class RetrySet(SortedSet):
    name = keys.RETRY


class DeadSet(SortedSet):
    name = keys.DEAD

    def kill(self, payload: wire.Payload | str, notify: bool = True) -> None:
        """Add a job to the dead set with Sidekiq's trims."""
        text = payload if isinstance(payload, str) else wire.dumps(payload)
        bury(self.wurk, text)
        if notify:
            self.wurk.report_death(wire.loads(text), KilledByAPI("Job killed by API"))


@dataclass
class Process:
    identity: str
    info: dict[str, Any]
    busy: int
    beat: float
    #: Quiet (Sidekiq calls it "stopping"): finishing its jobs, fetching no new ones.
    stopping: bool
    rss: int
    rtt_us: int
    concurrency: int
    wurk: Wurk

    @property
    def hostname(self) -> str:
        return _info_text(self.info.get("hostname"))

    @property
    def pid(self) -> int:
        return _int(self.info.get("pid"))

    @property
    def tag(self) -> str:
        return _info_text(self.info.get("tag"))

    @property
    def queues(self) -> list[str]:
        return _info_list(self.info.get("queues"))

    @property
    def labels(self) -> list[str]:
        return _info_list(self.info.get("labels"))

    @property
    def version(self) -> str:
        return _info_text(self.info.get("version"))

    @property
    def embedded(self) -> bool:
        """Sidekiq 8 embedded processes ignore quiet and stop sent from a dashboard."""
        return self.info.get("embedded") is True

    @property
    def started_at(self) -> float:
        return _stamp(self.info.get("started_at")) or 0.0

    @property
    def leader(self) -> bool:
        try:
            raw = self.wurk.redis.get(self.wurk.config.leader_key)
        except ResponseError:  # a leader key of another type names no leader
            return False
        return raw is not None and _text(raw) == self.identity  # no leader is not a process named ""

    def signal(self, name: str) -> None:
        signal_each([self], name)

    def quiet(self) -> None:
        self.signal("TSTP")

    def stop(self) -> None:
        self.signal("TERM")

    def dump_threads(self) -> None:
        self.signal("TTIN")


def signal_each(processes: list[Process], name: str) -> None:
    """Send ``name`` (TSTP, TERM, TTIN) to each process, all in one round trip; each process
    reads it on its next heartbeat."""
    if not processes:
        return
    pipe = processes[0].wurk.redis.pipeline(transaction=True)
    for p in processes:
        pipe.lpush(keys.signals(p.identity), name)
        pipe.expire(keys.signals(p.identity), keys.PROCESS_TTL)
    pipe.execute()


class ProcessSet:
    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk

    def identities(self) -> list[str]:
        return sorted(_text(i) for i in self.wurk.redis.sscan_iter(keys.PROCESSES))

    def __iter__(self) -> Iterator[Process]:
        ids = self.identities()
        if not ids:
            return iter([])
        pipe = self.wurk.redis.pipeline(transaction=False)
        for identity in ids:
            pipe.hmget(identity, "info", "busy", "beat", "quiet", "rss", "rtt_us", "concurrency")
        out = []
        for identity, reply in zip(ids, _replies(pipe), strict=True):
            info, busy, beat, quiet, rss, rtt, conc = reply or (None,) * 7
            if info is None:
                # Its hash expired (or its key is not a hash): the process is gone, and the
                # poller's cleanup prunes it.
                continue
            data = _decode_object(info) or {}
            concurrency = _int(conc) if conc else _int(data.get("concurrency"))
            out.append(
                Process(
                    identity=identity,
                    info=data,
                    busy=_int(busy),
                    beat=_float(beat),
                    stopping=_text(quiet) == "true",
                    rss=_int(rss),
                    rtt_us=_int(rtt),
                    concurrency=concurrency,
                    wurk=self.wurk,
                )
            )
        return iter(out)

    def size(self) -> int:
        return int(self.wurk.redis.scard(keys.PROCESSES))

    def total_concurrency(self) -> int:
        return sum(p.concurrency for p in self)

    def quiet_all(self) -> None:
        signal_each(list(self), "TSTP")

    def stop_all(self) -> None:
        signal_each(list(self), "TERM")


@dataclass
class RunningJob:
    identity: str
    tid: str
    queue: str
    run_at: int
    record: JobRecord


class Workers:
    """What every process is running right now (the busy-work hashes)."""

    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk

    def __iter__(self) -> Iterator[RunningJob]:
        redis = self.wurk.redis
        ids = ProcessSet(self.wurk).identities()
        if not ids:
            return iter([])
        pipe = redis.pipeline(transaction=False)
        for identity in ids:
            pipe.hgetall(keys.work(identity))
            pipe.hgetall(keys.legacy_workers(identity))
        replies = _replies(pipe)
        out = []
        for i, identity in enumerate(ids):
            # Sidekiq <= 6.4.1 processes write the same hash under its old name.
            work = replies[2 * i] or replies[2 * i + 1] or {}
            for tid, value in sorted(work.items()):
                entry = _decode_object(value)
                if entry is None:
                    continue
                queue = entry.get("queue")
                out.append(
                    RunningJob(
                        identity=identity,
                        tid=_text(tid),
                        queue=queue if isinstance(queue, str) else "",
                        run_at=_int(entry.get("run_at")),
                        record=JobRecord(_payload_bytes(entry.get("payload"))),
                    )
                )
        return iter(out)

    def size(self) -> int:
        redis = self.wurk.redis
        ids = ProcessSet(self.wurk).identities()
        if not ids:
            return 0
        pipe = redis.pipeline(transaction=False)
        for identity in ids:
            pipe.hget(identity, "busy")
        return sum(_int(b) for b in _replies(pipe))


class Stats:
    """Cluster totals, read the way Sidekiq's ``Stats`` reads them."""

    def __init__(self, wurk: Wurk = default_wurk) -> None:
        self.wurk = wurk
        redis = wurk.redis
        pipe = redis.pipeline(transaction=False)
        pipe.get(keys.STAT_PROCESSED)
        pipe.get(keys.STAT_FAILED)
        pipe.zcard(keys.SCHEDULE)
        pipe.zcard(keys.RETRY)
        pipe.zcard(keys.DEAD)
        pipe.scard(keys.PROCESSES)
        pipe.lindex(keys.queue("default"), -1)
        pipe.get(keys.STAT_EXPIRED)
        processed, failed, scheduled, retries, dead, procs, oldest, expired = pipe.execute()
        self.processed = _int(processed)
        self.failed = _int(failed)
        #: Jobs skipped because they expired (expiring jobs); also counted in ``processed``.
        self.expired = _int(expired)
        self.scheduled_size = int(scheduled)
        self.retry_size = int(retries)
        self.dead_size = int(dead)
        self.processes_size = int(procs)
        self.default_queue_latency = JobRecord(oldest).latency if oldest is not None else 0.0
        self.workers_size = Workers(wurk).size()
        self.queues = self._queue_sizes()
        self.enqueued = sum(self.queues.values())

    def _queue_sizes(self) -> dict[str, int]:
        redis = self.wurk.redis
        found = priority.group(redis.sscan_iter(keys.QUEUES))
        names = sorted(found, key=lambda n: (_text(n), n))
        pipe = redis.pipeline(transaction=False)
        for name in names:
            for listed in found[name]:
                pipe.llen(_queue_key(listed))
        replies = iter(pipe.execute())
        sizes: dict[str, int] = {}
        # Two names that are not UTF-8 may read alike; their jobs are counted under that text.
        # A queue's priority lists are counted with it (core/priority.py).
        for name in names:
            size = sum(int(next(replies)) for _ in found[name])
            sizes[_text(name)] = sizes.get(_text(name), 0) + size
        return sizes

    def reset(self) -> None:
        self.wurk.redis.mset({keys.STAT_PROCESSED: 0, keys.STAT_FAILED: 0, keys.STAT_EXPIRED: 0})

    @staticmethod
    def history(
        days: int = 30, start: date | None = None, wurk: Wurk = default_wurk
    ) -> dict[str, dict[str, int]]:
        """Daily ``processed`` and ``failed`` counts, newest day first, keyed by ISO date (UTC)."""
        if not 1 <= days <= 180:
            raise ValueError("days must be between 1 and 180")
        first = start or datetime.now(UTC).date()
        dates = [(first - timedelta(days=i)).isoformat() for i in range(days)]
        out: dict[str, dict[str, int]] = {}
        for kind in ("processed", "failed"):
            values = wurk.redis.mget([keys.daily_stat(kind, d) for d in dates])
            out[kind] = {d: _int(v) for d, v in zip(dates, values, strict=True)}
        return out


#: The INFO fields Sidekiq's Web UI shows (and its ``/stats`` JSON reports).
REDIS_INFO_FIELDS = (
    "redis_version",
    "uptime_in_days",
    "connected_clients",
    "used_memory_human",
    "used_memory_peak_human",
)


def redis_info(wurk: Wurk = default_wurk) -> dict[str, Any]:
    """The server's ``INFO``, with ``store_name``/``store_version`` saying Redis or Valkey.

    A server that refuses INFO (some hosted ones rename it) gives only what is known: ``{}``
    plus the store name ``"unknown"``; connection errors propagate.
    """
    import redis.exceptions

    try:
        info: dict[str, Any] = dict(wurk.redis.info())
    except redis.exceptions.ResponseError:
        info = {}
    if "valkey_version" in info or info.get("server_name") == "valkey":
        info["store_name"] = "valkey"
        info["store_version"] = str(info.get("valkey_version", info.get("redis_version", "")))
    elif "redis_version" in info:
        info["store_name"] = "redis"
        info["store_version"] = str(info["redis_version"])
    else:
        info["store_name"] = "unknown"
        info["store_version"] = ""
    return info


@dataclass(frozen=True)
class QueueGauge:
    """One queue's size and latency at one moment: in a metrics snapshot (``History``), in
    the Prometheus scrape and the StatsD gauges."""

    name: str
    size: int
    #: Age in seconds of its oldest job when it was read.
    latency: float


@dataclass
class QueueSummary:
    name: str
    size: int
    #: Age in seconds of the oldest job (the next to run); 0.0 when empty.
    latency: float
    paused: bool


def queue_summaries(wurk: Wurk = default_wurk) -> list[QueueSummary]:
    """Every queue's size, latency and paused flag: one round trip after listing the queues."""
    queues = Queue.all(wurk)
    if not queues:
        return []
    pipe = wurk.redis.pipeline(transaction=False)
    for q in queues:
        pipe.sismember(keys.PAUSED, q.raw_name)
        for key in q._keys():
            pipe.llen(key)
            pipe.lindex(key, -1)
    replies = iter(pipe.execute())
    out = []
    for q in queues:
        paused = next(replies)
        size, latency = 0, 0.0
        # A queue with priorities: its lists' sizes together, its oldest job's age (core/priority.py).
        for _ in q.lists:
            size += int(next(replies))
            oldest = next(replies)
            if oldest is not None:
                latency = max(latency, JobRecord(oldest, q.name).latency)
        out.append(QueueSummary(q.name, size, latency, bool(paused)))
    return out
