"""``JobStatus``: a tracked job's status read back by jid (the data API and the dashboard).

A status hash may hold anything anyone wrote under ``status:<jid>``: every field is read
on its own, and one that cannot be used reads as ``None`` (a ``result`` that is not JSON
reads as withheld, saying so), so one bad field never hides the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from django_wurk.core import wire
from django_wurk.core.features.status.record import CANCELLED, DEAD, FAILED, SUCCEEDED, status_key

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: Text fields are shown cut to this many characters (a hash written by hand may hold more).
TEXT_MAX = 8 * 1024


def _text(value: bytes | None) -> str | None:
    if value is None:
        return None
    text = value.decode("utf-8", "replace")
    return text if len(text) <= TEXT_MAX else text[:TEXT_MAX] + "..."


def _number(value: bytes | None) -> float | None:
    if value is None or len(value) > 40:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _engine(wurk: Wurk | None) -> Wurk:
    if wurk is not None:
        return wurk
    from django_wurk.core.engine import wurk as default

    return default


@dataclass(frozen=True)
class JobStatus:
    """What a ``track=True`` job's status says (see docs/status.md for each field)."""

    jid: str
    #: ``enqueued``, ``running``, ``succeeded``, ``retrying``, ``failed``, ``dead`` or
    #: ``cancelled`` (or
    #: whatever another writer left there).
    state: str | None
    job_class: str | None
    queue: str | None
    #: From 0 to 100, as the job last reported it.
    progress: float | None
    message: str | None
    #: The return value (decoded JSON), once the job succeeded and if it was kept.
    result: Any
    #: Why the return value was not kept (too large, not JSON, encrypted job).
    result_withheld: str | None
    #: The last failure, ``Class: message``.
    error: str | None
    retry_count: int | None
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None
    #: Seconds the status is still kept (``STATUS_RETENTION`` from its last change).
    expires_in: float | None

    @property
    def finished(self) -> bool:
        """True once nothing more will happen to the job (``succeeded``, ``failed``, ``dead``,
        ``cancelled``)."""
        return self.state in (SUCCEEDED, FAILED, DEAD, CANCELLED)

    @classmethod
    def get(cls, jid: str, wurk: Wurk | None = None) -> JobStatus | None:
        """The status of the job ``jid``, or ``None`` if there is none (never tracked, or
        ``STATUS_RETENTION`` passed since its last change)."""
        redis = _engine(wurk).redis
        key = status_key(jid)
        try:
            pipe = redis.pipeline(transaction=True)
            pipe.hgetall(key)
            pipe.pttl(key)
            fields, ttl = pipe.execute()
        except ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                return None  # not a status hash: nothing to read there
            raise
        if not fields:
            return None
        return cls.parse(jid, fields, ttl)

    @classmethod
    def parse(cls, jid: str, fields: dict[bytes, bytes], ttl: int | None = None) -> JobStatus:
        """A status from the raw fields of its hash."""
        result: Any = None
        withheld = _text(fields.get(b"result_withheld"))
        raw = fields.get(b"result")
        if raw is not None:
            try:
                result = wire.decode_json(raw, "result")
            except wire.PayloadError as exc:
                withheld = f"unreadable: {exc}"
        count = _number(fields.get(b"retry_count"))
        return cls(
            jid=jid,
            state=_text(fields.get(b"state")),
            job_class=_text(fields.get(b"class")),
            queue=_text(fields.get(b"queue")),
            progress=_number(fields.get(b"progress")),
            message=_text(fields.get(b"message")),
            result=result,
            result_withheld=withheld,
            error=_text(fields.get(b"error")),
            retry_count=int(count) if count is not None and count == int(count) else None,
            enqueued_at=_number(fields.get(b"enqueued_at")),
            started_at=_number(fields.get(b"started_at")),
            finished_at=_number(fields.get(b"finished_at")),
            expires_in=ttl / 1000 if isinstance(ttl, int) and ttl >= 0 else None,
        )

    @staticmethod
    def delete(jid: str, wurk: Wurk | None = None) -> bool:
        """Forget the status of ``jid`` now; True if there was one."""
        return bool(_engine(wurk).redis.delete(status_key(jid)))
