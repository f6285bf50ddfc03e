"""The job payload format: JSON codec, timestamps, jids, error fields, backtrace codec.

This module owns the bytes we put in Redis, and writes them as Sidekiq does: compact JSON
with raw UTF-8 (``Sidekiq.dump_json`` is Ruby's ``JSON.generate``, Sidekiq 6.4.1
lib/sidekiq.rb), 24-hex jids (``SecureRandom.hex(12)``, lib/sidekiq/job_util.rb), and job
timestamps in one of two styles. Float seconds are read correctly by every Sidekiq version;
integer milliseconds match Sidekiq 8's own bytes (docs/interop.md says which to choose).
Readers accept both, field by field, because a payload can be created by one version and
failed by another.
"""

from __future__ import annotations

import base64
import json
import operator
import os
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

Payload = dict[str, Any]

#: Sidekiq keeps the first 10,000 characters of an exception message.
MAX_ERROR_MESSAGE = 10_000
#: Fields that hold job timestamps (the only ones whose unit differs between versions).
TIMESTAMP_FIELDS = ("created_at", "enqueued_at", "failed_at", "retried_at", "discarded_at")

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class TimestampStyle(StrEnum):
    """How job timestamps are written. Scores, beats and ``run_at`` are always seconds."""

    FLOAT_SECONDS = "float"
    INT_MILLISECONDS = "ms"


class PayloadError(ValueError):
    """A payload read from Redis cannot be run; the message says why, for the dead set."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


def dumps(payload: Any) -> str:
    """Encode like Ruby's ``JSON.generate``: compact, raw UTF-8, no NaN."""
    return _encoder.encode(payload)


def dumps_alike(payloads: Sequence[Payload], varying: tuple[str, ...] = ("args", "jid")) -> list[str]:
    """Encode payloads that differ only in their ``varying`` fields, each exactly as ``dumps``.

    A bulk push's payloads share every other field, as the very same objects (one head, one
    timestamp per batch), and encoding was most of a bulk push's time. So the shared fields
    are encoded once, from the first payload, and each payload pays only for its own args
    and jid. A payload with other keys, another key order or other shared values (say,
    changed by middleware) is encoded whole, so the bytes never differ from ``dumps``.
    """
    if len(payloads) < 2:
        return [dumps(p) for p in payloads]
    first = payloads[0]
    order = tuple(first)
    if not all(type(k) is str for k in order):
        return [dumps(p) for p in payloads]
    shared_keys = [k for k in order if k not in varying]
    shared_values = [first[k] for k in shared_keys]
    # The text between varying values: pieces[i] precedes the i-th varying field's value.
    fields: list[str] = []
    pieces: list[str] = []
    text = "{"
    for i, key in enumerate(order):
        text += ("," if i else "") + _encoder.encode(key) + ":"
        if key in varying:
            fields.append(key)
            pieces.append(text)
            text = ""
        else:
            text += _encoder.encode(first[key])
    pieces.append(text + "}")
    encode = _encoder.encode
    out: list[str] = []
    for payload in payloads:
        if tuple(payload) != order or not all(
            map(operator.is_, map(payload.__getitem__, shared_keys), shared_values)
        ):
            out.append(encode(payload))
            continue
        parts = [pieces[0]]
        for i, key in enumerate(fields):
            parts.append(encode(payload[key]))
            parts.append(pieces[i + 1])
        out.append("".join(parts))
    return out


def loads(raw: bytes | str) -> Payload:
    """Decode a job read from Redis, refusing anything a worker cannot run.

    The error classes are stable names an operator sees in the dead set.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError(
                "InvalidPayload", f"payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise PayloadError("InvalidPayload", f"payload is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise PayloadError("InvalidPayload", f"payload is a JSON {type(payload).__name__}, not an object")
    job_class = payload.get("class")
    if not isinstance(job_class, str) or not job_class:
        raise PayloadError("InvalidPayload", "payload has no 'class' string")
    if "args" not in payload:
        raise PayloadError("InvalidPayload", "payload has no 'args'")
    if not isinstance(payload["args"], list):
        raise PayloadError(
            "InvalidPayload", f"payload 'args' is a {type(payload['args']).__name__}, not a list"
        )
    return payload


def new_jid() -> str:
    """24 lowercase hex characters, like ``SecureRandom.hex(12)``."""
    return os.urandom(12).hex()


def now_stamp(style: TimestampStyle, now: float | None = None) -> float | int:
    """The current time as a job timestamp in ``style``.

    Float seconds always carry a fraction in JSON (``1767225600.0``), which matters because
    Sidekiq 8 takes a JSON integer to be milliseconds.
    """
    t = time.time() if now is None else now
    if style is TimestampStyle.INT_MILLISECONDS:
        return int(t * 1000)
    return float(t)


def read_stamp(value: Any) -> float | None:
    """A job timestamp as float epoch seconds, whatever style wrote it.

    Floats are seconds and integers milliseconds (Sidekiq 8's rule); an integer small
    enough to be a plausible seconds value (< 10^11) and numeric strings are seconds.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        return value / 1000.0 if value >= 100_000_000_000 else float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def error_message(exc: BaseException) -> str:
    """The exception text as Sidekiq stores it: at most 10,000 characters, valid UTF-8."""
    text = str(exc)
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text[:MAX_ERROR_MESSAGE]


def error_class(exc: BaseException) -> str:
    return type(exc).__name__


def encode_backtrace(lines: Iterable[str]) -> str:
    """base64(zlib(JSON array)) in strict base64, readable by every Sidekiq version."""
    raw = dumps(list(lines)).encode("utf-8")
    return base64.b64encode(zlib.compress(raw)).decode("ascii")


def decode_backtrace(value: Any) -> list[str]:
    """Decode ``error_backtrace`` in any of its historical shapes.

    Accepts strict or line-wrapped base64 (Sidekiq <= 7.2.2 wraps at 60 columns) and the
    very old raw JSON array. Returns an empty list for anything unreadable: a backtrace is
    diagnostic data and must never stop a retry or a page from rendering.
    """
    if isinstance(value, list):
        return [str(line) for line in value]
    if not isinstance(value, str):
        return []
    try:
        decoded = json.loads(zlib.decompress(base64.b64decode(value)))
    except (ValueError, zlib.error):
        return []
    return [str(line) for line in decoded] if isinstance(decoded, list) else []


#: Exactly these types (not subclasses, which may encode differently) need no further check.
_FLAT = frozenset({str, int, bool, type(None)})


def check_json_native(args: Any, where: str = "args") -> None:
    """Raise a ``TypeError`` naming the first value JSON cannot carry faithfully.

    Sidekiq 7+ refuses non-native arguments at enqueue: a datetime or a model instance
    would arrive in the worker as something else. Dict keys must be strings, because a
    JSON round trip turns ``{1: "x"}`` into ``{"1": "x"}``.
    """
    # Most jobs take a few ids and strings: check those without recursing (every enqueue).
    if type(args) is list and all(type(item) in _FLAT for item in args):
        return
    if args is None or isinstance(args, (str, bool, int)):
        return
    if isinstance(args, float):
        if args != args or args in (float("inf"), float("-inf")):
            raise TypeError(f"{where} is {args!r}, which JSON cannot represent")
        return
    if isinstance(args, (list, tuple)):
        for i, item in enumerate(args):
            check_json_native(item, f"{where}[{i}]")
        return
    if isinstance(args, dict):
        for key, item in args.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{where} has a key {key!r} of type {type(key).__name__}; JSON keys must be str"
                )
            check_json_native(item, f"{where}[{key!r}]")
        return
    raise TypeError(
        f"{where} is a {type(args).__module__}.{type(args).__qualname__}, which is not JSON-native; "
        "pass str, int, float, bool, None, list or dict (e.g. an id or an ISO date string)"
    )


def job_display_class(payload: Mapping[str, Any]) -> str:
    """The class a person cares about: ``display_class``, ActiveJob's ``wrapped``, else ``class``."""
    for key in ("display_class", "wrapped", "class"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return "?"


def loads_object(raw: bytes | str) -> Payload:
    """Decode any JSON object (heartbeat info, work entries); ``ValueError`` otherwise."""
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
