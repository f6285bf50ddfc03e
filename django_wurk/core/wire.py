"""The job payload format: JSON codec, timestamps, jids, error fields, backtrace codec.

This module owns the bytes we put in Redis, and writes them as Sidekiq does: compact JSON
with raw UTF-8 (``Sidekiq.dump_json`` is Ruby's ``JSON.generate``, Sidekiq 6.4.1
lib/sidekiq.rb), 24-hex jids (``SecureRandom.hex(12)``, lib/sidekiq/job_util.rb), and job
timestamps in one of two styles. Float seconds are read correctly by every Sidekiq version;
integer milliseconds match Sidekiq 8's own bytes (docs/interop.md says which to choose).
Readers accept both, field by field, because a payload can be created by one version and
failed by another.

It also owns the one decoding policy for everything read from Redis: what Ruby's
``JSON.parse`` accepts and ``JSON.generate`` can write back, nothing more. Python's json
alone is laxer (NaN, Infinity, lone surrogates) and recurses without bound, so a value it
decodes could fail later, when the job's retry is written, and strand the job. Decoding
refuses such input up front, and so whatever ``loads`` returns, ``dumps`` can encode.
"""

from __future__ import annotations

import base64
import json
import math
import operator
import os
import re
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, NoReturn

_fast_loads: Callable[[bytes], Any] | None
try:  # a C decoder for the per-job read; the policy below stays the one that decides
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a default dependency, but optional here
    _fast_loads = None

Payload = dict[str, Any]

#: Sidekiq keeps the first 10,000 characters of an exception message.
MAX_ERROR_MESSAGE = 10_000
#: Fields that hold job timestamps (the only ones whose unit differs between versions).
TIMESTAMP_FIELDS = ("created_at", "enqueued_at", "failed_at", "retried_at", "discarded_at")
#: Ruby's ``JSON.parse`` refuses documents nested deeper than this (its ``max_nesting``).
MAX_NESTING = 100
#: An encoded backtrace is diagnostic data: one that inflates past this is not read.
MAX_BACKTRACE_BYTES = 1024 * 1024

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: Option names with a meaning to the engine, in the order Sidekiq writes them.
KNOWN_OPTIONS = ("retry", "queue", "retry_for", "retry_queue", "dead", "backtrace", "tags", "priority")
#: Payload keys no option may set: the client owns them.
RESERVED_KEYS = frozenset({"class", "args", "jid", "created_at", "enqueued_at", "at", "wrapped"})


class TimestampStyle(StrEnum):
    """How job timestamps are written. Scores, beats and ``run_at`` are always seconds."""

    FLOAT_SECONDS = "float"
    INT_MILLISECONDS = "ms"


class PayloadError(ValueError):
    """A payload read from Redis cannot be run; the message says why, for the dead set."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class UnencodableError(PayloadError, TypeError):
    """A value JSON cannot carry (NaN, a set, a cycle...); a ``TypeError`` too, for callers of old."""

    def __init__(self, message: str) -> None:
        super().__init__("InvalidPayload", message)


def _shared_c_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """The C encoder ``_encoder.encode`` builds on every call, built once, without markers.

    ``JSONEncoder.encode`` builds a Python-level ``iterencode`` and a new C encoder object
    per call, which cost as much as encoding a job (two floats included). The one difference
    of this one is that it keeps no markers dict (shared state, unsafe across threads), so a
    cycle ends in ``RecursionError`` rather than "Circular reference detected": callers try it
    first and, on any error, encode again the usual way, which gives the usual answer or
    error. Whatever it returns is exactly what ``_encoder.encode`` returns.
    """
    if c_make_encoder is None:  # pragma: no cover - CPython always has the C accelerator
        return None
    return c_make_encoder(  # type: ignore[no-any-return]
        None,
        _encoder.default,
        encode_basestring,
        None,
        _encoder.key_separator,
        _encoder.item_separator,
        _encoder.sort_keys,
        _encoder.skipkeys,
        _encoder.allow_nan,
    )


_fast_encode = _shared_c_encoder()


def dumps(payload: Any) -> str:
    """Encode like Ruby's ``JSON.generate``: compact, raw UTF-8, no NaN.

    Every failure is an ``UnencodableError`` (a ``PayloadError``), so a caller writing back
    something it read from Redis has one exception to route to the dead set.
    """
    if _fast_encode is not None and type(payload) is dict:
        try:
            return "".join(_fast_encode(payload, 0))
        except Exception:  # encoded again below, which says what is wrong
            pass
    try:
        return _encoder.encode(payload)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise UnencodableError(f"cannot be encoded as JSON ({type(exc).__name__}: {exc})") from exc


def dumps_alike(payloads: Sequence[Payload], varying: tuple[str, ...] = ("args", "jid")) -> list[str]:
    """Encode payloads that differ only in their ``varying`` fields, each exactly as ``dumps``.

    A bulk push's payloads share every other field, as the very same objects (one head, one
    timestamp per batch), and encoding was most of a bulk push's time. So the shared fields
    are encoded once, from the first payload, and each payload pays only for its own args
    and jid. A payload with other keys, another key order or other shared values (say,
    changed by middleware) is encoded whole, so the bytes never differ from ``dumps``.

    Kept because it still pays after the move to ``core/``: ``perform_bulk`` of 50,000 noop
    jobs onto an embedded Valkey ran at 1.20x the jobs/s of ``dumps`` per payload (median of
    7 rounds, A and B alternated in one run; two more runs gave 1.33x and 1.22x). Measure it
    again with ``bench/encode_ab.py`` before changing the client's encoding.
    """
    try:
        return _dumps_alike(payloads, varying)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        if isinstance(exc, PayloadError):
            raise
        raise UnencodableError(f"cannot be encoded as JSON ({type(exc).__name__}: {exc})") from exc


def _dumps_alike(payloads: Sequence[Payload], varying: tuple[str, ...]) -> list[str]:
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
    fast = _fast_encode
    join = "".join
    out: list[str] = []
    append = out.append
    if fields == ["args", "jid"] and len(shared_keys) > 1:
        # The client's layout: one join per job. The shared values are compared by identity,
        # not equality (``1 == True`` and ``0.0 == -0.0``, which encode differently), in one
        # itemgetter call and a C loop (itemgetter of one key would not give a tuple).
        head, middle, tail = pieces
        get = operator.itemgetter(*shared_keys)
        expected = tuple(shared_values)
        is_not = operator.is_not
        for payload in payloads:
            if tuple(payload) != order or any(map(is_not, get(payload), expected)):
                append(encode(payload))
                continue
            args, jid = payload["args"], payload["jid"]
            if fast is None or type(jid) is not str:
                append(join((head, encode(args), middle, encode(jid), tail)))
                continue
            try:
                chunks = fast(args, 0)
            except Exception:
                # Encoded again the usual way, which raises the usual error (see _shared_c_encoder).
                append(join((head, encode(args), middle, encode(jid), tail)))
                continue
            append(join((head, join(chunks), middle, encode_basestring(jid), tail)))
        return out
    for payload in payloads:
        if tuple(payload) != order or not all(
            map(operator.is_, map(payload.__getitem__, shared_keys), shared_values)
        ):
            append(encode(payload))
            continue
        parts = [pieces[0]]
        for i, key in enumerate(fields):
            parts.append(encode(payload[key]))
            parts.append(pieces[i + 1])
        append(join(parts))
    return out


class _Refused(ValueError):
    """Raised inside the JSON scanner for input the policy refuses; becomes a ``PayloadError``."""


def _refuse_constant(name: str) -> NoReturn:
    raise _Refused(f"{name} is not a JSON number (Ruby's JSON refuses it, and it could not be written back)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:40]}{'...' if len(text) > 40 else ''} is out of range for a float")
    return value


#: Built once: ``json.loads`` with hooks would build a decoder (and its scanner) per call.
_decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


#: Every byte but the ones that shape a JSON document (quotes and brackets), to delete.
_NOT_SHAPE = bytes(b for b in range(256) if b not in b'"[]{}')
#: Openers become ``(`` and closers ``)``: depth is all that is measured.
_PARENS = bytes.maketrans(b"[]{}", b"()()")
_TOO_MANY_OPENERS = b"(" * (MAX_NESTING + 1)
#: A ``\uD800``-``\uDFFF`` escape: half of a UTF-16 pair, which may be left alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def too_deep(data: bytes) -> bool:
    """True if a JSON text could nest deeper than ``MAX_NESTING``, found without recursing.

    Python's json recurses once per level, so a 100,000-deep document reaches the C stack's
    limit inside the parser; measuring first refuses it before any recursion. A text with
    at most ``MAX_NESTING`` brackets in all cannot nest deeper (the usual case: two scans).
    Otherwise escapes and then strings are cut out, leaving only brackets, and innermost
    pairs are removed round by round: the rounds are the depth, and a run of more than
    ``MAX_NESTING`` openers ends the count at once. Unmatched openers (invalid JSON) count
    as levels too, so the answer is never lower than how deep the parser would go before
    finding the error. Every step is a C loop over bytes (UTF-8 never puts a quote or a
    bracket byte inside a multi-byte character).
    """
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    shape = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_PARENS, _NOT_SHAPE)
    shape = b"".join(shape.split(b'"')[::2])  # what lies between strings
    rounds = 0
    while _TOO_MANY_OPENERS not in shape:
        reduced = shape.replace(b"()", b"")
        if len(reduced) == len(shape):
            return rounds + shape.count(b"(") > MAX_NESTING
        rounds += 1
        if rounds > MAX_NESTING:
            return True
        shape = reduced
    return True


#: Digits become ``9``: a run of 19 nines marks an integer orjson might not keep exact.
_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9999999999")
_LONG_DIGIT_RUN = b"9" * 19


def decode_json(raw: bytes | str, what: str = "payload") -> Any:
    """Decode any JSON text read from Redis under the one policy; ``PayloadError`` otherwise.

    Refused, each with a reason an operator can act on: invalid UTF-8, invalid JSON, NaN and
    (-)Infinity (and numbers too large for a float), nesting deeper than ``MAX_NESTING``, and
    lone UTF-16 surrogates (``"\\ud800"``), which no UTF-8 text can hold. What is returned can
    always be encoded again by ``dumps``.

    orjson, when installed, reads the common case about four times faster. It refuses all
    that the policy refuses except nesting deeper than ``MAX_NESTING`` (its limit is 1024,
    measured first here) and turns integers beyond 64 bits into floats (Python keeps them
    exact: a text with a run of 19 digits anywhere is left to Python). Whatever orjson
    refuses goes through the policy below, which decides and says why, so the answer and
    the error messages are the same with or without it.
    """
    if (
        _fast_loads is not None
        and type(raw) is bytes
        # find, not ``in``: ``bytes in bytes`` first tries the operand as an int and formats
        # the TypeError it catches, which cost more than the search itself.
        and raw.translate(_DIGITS_AS_NINES).find(_LONG_DIGIT_RUN) < 0
        and not too_deep(raw)
    ):
        try:
            return _fast_loads(raw)
        except ValueError:
            pass
    return strict_decode_json(raw, what)


def strict_decode_json(raw: bytes | str, what: str = "payload") -> Any:
    """``decode_json`` with Python's json alone: the policy as written, and its reasons."""
    if isinstance(raw, bytes):
        data = raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError(
                "InvalidPayload", f"{what} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
    else:
        text = raw
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PayloadError("InvalidPayload", f"{what} is not valid Unicode ({exc.reason})") from None
    if too_deep(data):
        raise PayloadError(
            "InvalidPayload", f"{what} nesting is too deep (at most {MAX_NESTING} levels, as Ruby's JSON)"
        )
    try:
        value = _decoder.decode(text)
    except _Refused as exc:
        raise PayloadError("InvalidPayload", f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # not reached after the count above; kept so no input can crash a loop
        raise PayloadError("InvalidPayload", f"{what} nesting is too deep") from None
    except ValueError as exc:
        raise PayloadError("InvalidPayload", f"{what} is not valid JSON: {exc}") from None
    if "\\u" in text:
        match = _SURROGATE_ESCAPE.search(text)
        if match is not None:
            try:
                dumps(value).encode("utf-8")
            except (PayloadError, UnicodeEncodeError):
                raise PayloadError(
                    "InvalidPayload",
                    f"{what} holds a lone UTF-16 surrogate ({match.group()}), which is not valid Unicode",
                ) from None
    return value


def loads(raw: bytes | str) -> Payload:
    """Decode a job read from Redis, refusing anything a worker cannot run or write back.

    The error classes are stable names an operator sees in the dead set.
    """
    payload = decode_json(raw)
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


def new_jids(count: int) -> list[str]:
    """``count`` jids, as ``new_jid`` makes them, from one read of the system's randomness.

    A bulk push needs a jid per job, and a system call per jid cost more than the rest of
    making the jid; the same bytes read at once are as random.
    """
    text = os.urandom(12 * count).hex()
    return [text[i : i + 24] for i in range(0, 24 * count, 24)]


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
    seconds: float
    try:
        if isinstance(value, float):
            seconds = value
        elif isinstance(value, int):
            seconds = value / 1000.0 if value >= 100_000_000_000 else float(value)
        elif isinstance(value, str):
            seconds = float(value)
        else:
            return None
    except (ValueError, OverflowError):  # "soon", or an integer no float can hold
        return None
    # "nan", "inf", "1e999": no time at all, and arithmetic on them would poison whatever uses it.
    return seconds if math.isfinite(seconds) else None


def error_message(exc: BaseException) -> str:
    """The exception text as Sidekiq stores it: at most 10,000 characters, valid UTF-8.

    An exception whose ``__str__`` raises still gets a message (its class), since the
    failure it reports must be recorded whatever the exception is like.
    """
    try:
        text = str(exc)
    except Exception as broken:
        text = f"<unprintable {type(exc).__name__}: its __str__ raised {type(broken).__name__}>"
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
    diagnostic data and must never stop a retry or a page from rendering. It is read under
    the same policy as a payload, and one that inflates past ``MAX_BACKTRACE_BYTES`` (a
    deflate bomb in the dead set) is not read at all.
    """
    if isinstance(value, list):
        return [str(line) for line in value]
    if not isinstance(value, str):
        return []
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.b64decode(value), MAX_BACKTRACE_BYTES)
        if inflater.unconsumed_tail:
            return []
        decoded = decode_json(raw, "backtrace")
    except (ValueError, zlib.error):
        return []
    return [str(line) for line in decoded] if isinstance(decoded, list) else []


#: Exactly these types (not subclasses, which may encode differently) need no further check.
FLAT_TYPES = _FLAT = frozenset({str, int, bool, type(None)})


def check_json_native(args: Any, where: str = "args") -> None:
    """Raise a ``TypeError`` naming the first value JSON cannot carry faithfully.

    Sidekiq 7+ refuses non-native arguments at enqueue: a datetime or a model instance
    would arrive in the worker as something else. Dict keys must be strings, because a
    JSON round trip turns ``{1: "x"}`` into ``{"1": "x"}``.
    """
    # Most jobs take a few ids and strings: check those without recursing (every enqueue),
    # and without a generator, whose frame cost as much as the rest of a bulk push's check.
    if type(args) is list:
        for item in args:
            if type(item) not in _FLAT:
                break
        else:
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


def display_text(raw: Any, limit: int) -> str:
    """Whatever a Redis field holds, as text of at most ``limit`` characters, for showing.

    Never raises: bytes that are not UTF-8 show replacement characters (a hostile value is
    displayed, not trusted), and only a bounded prefix of a huge value is decoded at all.
    """
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw[: limit * 4].decode("utf-8", "replace")
    return str(raw)[:limit]


def job_display_class(payload: Mapping[str, Any]) -> str:
    """The class a person cares about: ``display_class``, ActiveJob's ``wrapped``, else ``class``."""
    for key in ("display_class", "wrapped", "class"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return "?"


def loads_object(raw: bytes | str, what: str = "value") -> Payload:
    """Decode any JSON object (heartbeat info, work entries) under the one policy.

    Raises ``PayloadError`` (a ``ValueError``) for anything ``decode_json`` refuses and for
    JSON that is not an object.
    """
    value = decode_json(raw, what)
    if not isinstance(value, dict):
        raise PayloadError("InvalidPayload", f"{what} is a JSON {type(value).__name__}, not an object")
    return value
