"""Hostile Redis data: the shapes a member of a queue, a sorted set or a private list can take.

Issue 10's general guard says "nothing lost, nothing run twice without a trace" must hold for
every byte string that can sit in Redis, not only for the kinds we thought of. This module is
the shared list the corpus tests push into every key kind a loop reads (``test_corpus.py``:
processor, poller, reaper, heartbeat; ``test_corpus_dashboard.py``: dashboard pages, actions
and the data API), plus Hypothesis strategies for the shapes a fixed list would miss.

Each ``Member`` says what the engine owes it:

* ``reject``: it can never run (not UTF-8, not strict JSON, not an object, no ``class``
  string, ``args`` not a list, nesting past Ruby's 100...): it must reach the dead set exactly
  once, with a readable reason and its original bytes recoverable, and never run;
* ``accept``: it is a valid Sidekiq payload that Ruby would run: it must run exactly once;
* otherwise the engine may refuse it (the dead set, with its bytes) or run it; either way
  exactly once, and a failure must leave exactly one trace (retry or dead set).

Object members carry a ``corpus`` field (a marker unique per test and per place) so their
runs and re-encoded traces can be found; the others are found by their bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from django_wurk import Job, wurk
from django_wurk.core import activejob, keys

#: The registered job every runnable hostile member names; it counts its runs by marker.
HOSTILE_CLASS = "Hostile::Job"
#: The same, registered under an ActiveJob class name, for Rails wrapper payloads.
RAILS_CLASS = "HostileRailsJob"
#: The well-formed jobs pushed among the hostile ones; they count their runs by jid.
GOOD_CLASS = "Hostile::Good"
#: Hash: marker -> how many times a hostile member's job ran.
RUNS = "hostile:runs"
#: Hash: jid -> how many times a good job ran.
GOOD_RUNS = "hostile:good"

INF = float("inf")


class HostileFailure(Exception):
    """Raised by a hostile job that is meant to fail, so its failure has to be recorded."""


class HostileJob(Job):
    wire_name = HOSTILE_CLASS

    def retry_in(self, count: int, exc: BaseException) -> int:
        """An hour: a recorded failure must not come back and run again while a test watches."""
        return 3600

    def perform(self, *args: Any, **kwargs: Any) -> None:
        marker = self.payload.get("corpus")
        wurk.redis.hincrby(RUNS, marker if isinstance(marker, str) else f"?{marker!r}"[:200], 1)
        if self.payload.get("corpus_fail") is True:
            raise HostileFailure("this hostile job fails on purpose")


class HostileRailsJob(HostileJob):
    wire_name = RAILS_CLASS


class GoodJob(Job):
    wire_name = GOOD_CLASS

    def perform(self, *args: Any) -> None:
        wurk.redis.hincrby(GOOD_RUNS, self.jid, 1)


@dataclass(frozen=True)
class Member:
    """One hostile value and what the engine owes it (see the module docstring)."""

    name: str
    raw: bytes
    marker: str | None = None
    reject: bool = False
    accept: bool = False
    #: Names a registered class, so it may run; an unregistered class must never run.
    runnable: bool = False
    #: The job raises when it runs, so exactly one trace (retry or dead) must record it.
    fails: bool = False
    #: The payload's own queue when it is a usable name (where promotion sends it).
    queue: str | None = None

    @property
    def ident(self) -> str | bytes:
        """What identifies it in Redis: the marker, else the exact bytes."""
        return self.marker if self.marker is not None else self.raw

    def __repr__(self) -> str:
        return f"<Member {self.name!r}>"


def jid_for(marker: str) -> str:
    return hashlib.sha256(marker.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class Raw:
    """JSON text inserted verbatim where a value goes (NaN tokens, 5,000-digit numbers...)."""

    def __init__(self, text: str) -> None:
        self.text = text


def encode(doc: Any, ascii: bool = False) -> bytes:
    """Compact JSON, with ``NaN``/``Infinity`` tokens and ``Raw`` text kept as they are.

    Without ``ascii``, lone surrogates are written as their (invalid) UTF-8 bytes.
    """
    raws: list[str] = []

    def placeholders(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(value, dict):
            return {k: placeholders(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholders(v) for v in value]
        return value

    text = json.dumps(placeholders(doc), separators=(",", ":"), ensure_ascii=ascii, allow_nan=True)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), raw)
    return text.encode("utf-8", "surrogatepass")


#: In ``changes``: remove the field.
MISSING: Any = object()


def payload(marker: str, fail: bool, now: float, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """A well-formed hostile job, then ``changes`` (``MISSING`` removes a field)."""
    doc: dict[str, Any] = {
        "class": HOSTILE_CLASS,
        "args": [1, "two", {"three": 3.5}],
        "retry": True,
        "queue": "default",
        "jid": jid_for(marker),
        "created_at": now,
        "enqueued_at": now,
    }
    for key, value in (changes or {}).items():
        if value is MISSING:
            doc.pop(key, None)
        else:
            doc[key] = value
    doc["corpus"] = marker
    doc["corpus_fail"] = fail
    return doc


def good_payload(n: int, now: float, queue: str = "default", tag: str = "", **extra: Any) -> dict[str, Any]:
    """A well-formed job of ``GoodJob``; ``tag`` and ``n`` make its jid unique."""
    jid = hashlib.sha256(f"good-{tag}-{n}-{now!r}-{queue}".encode()).hexdigest()[:24]
    return {
        "class": GOOD_CLASS,
        "args": [n],
        "retry": True,
        "queue": queue,
        "jid": jid,
        "created_at": now,
        "enqueued_at": now,
        **extra,
    }


def nested(depth: int, inner: str = "1") -> str:
    """JSON text of ``depth`` nested lists around ``inner``."""
    return "[" * depth + inner + "]" * depth


def b64zlib(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data)).decode("ascii")


def _usable_queue(doc: Any) -> str | None:
    queue = doc.get("queue") if isinstance(doc, dict) else None
    return queue if isinstance(queue, str) and queue else None


# The corpus --------------------------------------------------------------------------------------

#: Values of the wrong type for each payload field; the engine may refuse or run such a
#: payload, but must never lose it, strand it or run it twice. ``Raw`` values are JSON text.
WRONG_TYPES: dict[str, list[tuple[str, Any]]] = {
    "jid": [("int", 5), ("null", None), ("list", ["x"]), ("object", {"x": 1}), ("empty", ""),
            ("newline", "a\nb"), ("url-ish", "../x/%2F?#frag"), ("100 KB", "j" * 100_000), ("float", 1.5)],
    "queue": [("list", ["default"]), ("int", 5), ("null", None), ("empty", ""), ("newline", "a\n"),
              ("object", {"x": 1}), ("10 KB", "q" * 10_000)],
    "retry": [("abc", "abc"), ("-1", -1), ("huge", 10**30), ("float", 1.5), ("list", []), ("object", {}),
              ("null", None), ('"0"', "0"), ("0", 0)],
    "retry_count": [("400 digits", Raw("9" * 400)), ("negative", -5), ("string", "abc"), ("float", 1.5),
                    ("null", None), ("list", [1]), ("5000 digits", Raw("9" * 5000))],
    "backtrace": [("abc", "abc"), ("[1]", [1]), ("true", True), ("-1", -1), ("huge", 10**30),
                  ("float", 1.5), ("object", {}), ("0", 0)],
    "retry_for": [("abc", "abc"), ("-1", -1), ("400 digits", Raw("9" * 400)), ("list", []), ("1e300", 1e300)],
    "retry_queue": [("int", 5), ("list", ["x"]), ("object", {}), ("empty", "")],
    "dead": [("no", "no"), ("0", 0), ("list", [])],
    "enqueued_at": [("nan", "nan"), ("abc", "abc"), ('"-Infinity"', "-Infinity"), ("1e30", 10**30),
                    ("-1e30", -(10**30)), ("400 digits", Raw("9" * 400)), ("list", []), ("object", {}),
                    ("true", True), ("1e308", 1e308), ("-1.0", -1.0)],
    "created_at": [("nan", "nan"), ("-Infinity string", "-Infinity"), ("400 digits", Raw("9" * 400)),
                   ("object", {})],
    "failed_at": [("nan", "nan"), ("abc", "abc"), ("400 digits", Raw("-" + "9" * 400)), ("list", [1])],
    "retried_at": [("inf", "inf"), ("1e308", 1e308)],
    "at": [("nan", "nan"), ("list", [])],
    "error_message": [("object", {"a": 1}), ("list", ["x"]), ("int", 5), ("null", None), ("20 KB", "e" * 20_000)],
    "error_class": [("int", 5), ("list", ["x"]), ("object", {})],
    "error_backtrace": [("not base64", "!!!"), ("int", 123), ("list", ["x", 5]),
                        ("zlib of non-JSON", b64zlib(b"not json")),
                        ("zlib of 10,000-deep JSON", b64zlib(nested(10_000).encode())),
                        ("truncated", "eJ")],
    "tags": [("string", "abc"), ("list of objects", [{}]), ("int", 5), ("list with null", [None])],
    "wrapped": [("int", 5), ("list", [])],
    "display_class": [("list", []), ("object", {}), ("empty", "")],
    # Keyword arguments: the worker reads "kwargs" to call perform; one that is no object can
    # never run (the dead set, with the reason), an odd object runs.
    "kwargs": [("list", [1]), ("string", "abc"), ("int", 5), ("null", None), ("true", True),
               ("empty object", {}), ("an empty key", {"": 1}), ("10,000 keys", {f"k{i}": i for i in range(10_000)}),
               ("a key with a NUL", {"a\u0000b": 1})],
    "recovered": [("abc", "abc"), ("-1", -1), ("400 digits", Raw("9" * 400)), ("float", 1.5)],
    # Unique jobs: a worker reads these to release a lock; none may stop or lose the job.
    "unique_for": [("abc", "abc"), ("string of digits", "600"), ("negative", -5), ("list", [600]),
                   ("true", True), ("400 digits", Raw("9" * 400)), ("object", {})],
    "unique_token": [("int", 5), ("not hex", "zz"), ("list", []), ("key-ish", "../x\n*"),
                     ("64 hex, no lock", "a" * 64), ("10 KB", "f" * 10_000)],
    "unlocks_at": [("abc", "abc"), ("list", [])],
    # Expiring jobs: none of these is a deadline (the job runs, with a warning), and none of the
    # expires_in values is a duration the poller's promotion could turn into one.
    "expires_at": [("abc", "abc"), ("numeric text", "1767225600"), ("list", []), ("object", {}), ("true", True),
                   ("-1", -1), ("0", 0), ("400 digits", Raw("9" * 400)), ("-400 digits", Raw("-" + "9" * 400)),
                   ("1e308", 1e308)],
    "expires_in": [("abc", "abc"), ("-1", -1), ("0", 0), ("1e300", 1e300), ("400 digits", Raw("9" * 400)),
                   ("list", []), ("true", True)],
    "encrypt": [("true, plain args", True), ("string true", "true"), ("1", 1), ("object", {"a": 1}),
                ("false", False)],
    # Timeouts: none of these is a limit (the job runs without one, with a warning); a real
    # limit that is huge must not overflow the deadline either.
    "timeout": [("abc", "abc"), ("numeric text", "30"), ("-1", -1), ("0", 0), ("nan", "nan"), ("list", [30]),
                ("object", {}), ("true", True), ("400 digits", Raw("9" * 400)), ("1e308", 1e308),
                ("a day", 86400)],
    # Job status: only true tracks (these are not), and a tracked job's status writes never
    # stop or multiply it.
    "track": [("string true", "true"), ("1", 1), ("object", {}), ("list", [True]), ("true", True)],
}  # fmt: skip


def _envelope(**changes: Any) -> dict[str, Any]:
    """An encrypted argument's shape (docs/encryption.md) that no key of the corpus opens."""
    doc: dict[str, Any] = {"django_wurk.enc": 1, "key": "1", "iv": "AAAAAAAAAAAAAAAA", "ct": "",
                           "tag": "AAAAAAAAAAAAAAAAAAAAAA=="}  # fmt: skip
    for key, value in changes.items():
        if value is MISSING:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


#: ``encrypt: true`` with a last argument no worker can open (the corpus configures no key):
#: each must reach the dead set once, never be retried, and never crash a loop.
ENCRYPTED_SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("encrypted, well-formed, no such key", {"args": [1, _envelope(key="9")]}),
    ("encrypted, key a list", {"args": [1, _envelope(key=["1"])]}),
    ("encrypted, key null", {"args": [_envelope(key=None)]}),
    ("encrypted, iv an int", {"args": [_envelope(iv=12)]}),
    ("encrypted, iv not base64", {"args": [_envelope(iv="!!not base64!!")]}),
    ("encrypted, ct an object", {"args": [_envelope(ct={"a": 1})]}),
    ("encrypted, ct 2 MB", {"args": [_envelope(ct="A" * 2_000_000)]}),
    ("encrypted, tag missing", {"args": [_envelope(tag=MISSING)]}),
    ("encrypted, marker a string", {"args": [_envelope(**{"django_wurk.enc": "1"})]}),
    ("encrypted, marker 1e400", {"args": [_envelope(**{"django_wurk.enc": Raw("1e400")})]}),
    ("encrypted, envelope a list", {"args": [[1, 2, 3]]}),
    ("encrypted, Sidekiq Enterprise blob", {"args": [1, "BAhTOhFTaWRla2lxOjpFbmMIOgdpdiIV"]}),
    ("encrypted, no args", {"args": []}),
    ("encrypted, lone surrogate in ct", {"args": [_envelope(ct="\ud800")]}),
]

#: Payloads that break strict JSON (RFC 8259, what Ruby's parser accepts): always refused.
NOT_STRICT: list[tuple[str, dict[str, Any]]] = [
    ("NaN in args", {"args": [Raw("NaN")]}),
    ("Infinity in args", {"args": [Raw("Infinity")]}),
    ("-Infinity in args", {"args": [1, Raw("-Infinity")]}),
    ("NaN nested in args", {"args": [{"x": [Raw("NaN")]}]}),
    ("NaN retry_count", {"retry_count": Raw("NaN")}),
    ("-Infinity enqueued_at", {"enqueued_at": Raw("-Infinity")}),
    ("Infinity created_at", {"created_at": Raw("Infinity")}),
    ("NaN failed_at", {"failed_at": Raw("NaN")}),
    ("NaN retry", {"retry": Raw("NaN")}),
    ("Infinity backtrace", {"backtrace": Raw("Infinity")}),
    ("NaN jid", {"jid": Raw("NaN")}),
    ("NaN recovered", {"recovered": Raw("NaN")}),
    ("100,000-deep lists in args", {"args": [Raw(nested(100_000))]}),
    ("100,000-deep objects in a field", {"bid": Raw('{"a":' * 100_000 + "1" + "}" * 100_000)}),
]

#: ``class`` and ``args`` the engine cannot run at all: refused before anything runs.
NOT_A_JOB: list[tuple[str, dict[str, Any]]] = [
    ("class int", {"class": 5}),
    ("class list", {"class": [HOSTILE_CLASS]}),
    ("class null", {"class": None}),
    ('class ""', {"class": ""}),
    ("class object", {"class": {"x": 1}}),
    ("class true", {"class": True}),
    ("class missing", {"class": MISSING}),
    ("args string", {"args": "abc"}),
    ("args object", {"args": {"a": 1}}),
    ("args null", {"args": None}),
    ("args int", {"args": 5}),
    ("args missing", {"args": MISSING}),
]

#: Unregistered classes: they fail (and retry, a deploy race heals itself), and never run.
UNKNOWN_CLASSES = [
    "No::Such::Job",
    "os.system",
    "django_wurk.core.engine.Wurk",
    "tests.hostile.corpus.HostileJob",  # the Python path, not the wire name
    HOSTILE_CLASS + " ",
    HOSTILE_CLASS.lower(),
    "Evil\nClass",
    "<script>alert(1)</script>",
    "\u202eclass\u0000",
    "k" * 100_000,
]


def _aj(data: Any, **extra: Any) -> dict[str, Any]:
    return {"class": activejob.RAILS_WRAPPER, "args": [data], **extra}


def _aj_data(arguments: Any, **extra: Any) -> dict[str, Any]:
    return {"job_class": RAILS_CLASS, "job_id": "8a1b", "arguments": arguments, **extra}


#: ActiveJob wrappers with broken inner data: (name, changes, may the wrapped job run).
ACTIVEJOB: list[tuple[str, dict[str, Any], bool]] = [
    ("wrapper with empty args", {"class": activejob.RAILS_WRAPPER, "args": []}, False),
    ("wrapper with a string argument", {"class": activejob.RAILS_WRAPPER, "args": ["x"]}, False),
    ("wrapper, job_class int", _aj({"job_class": 5, "arguments": []}), False),
    ("wrapper, arguments a string", _aj(_aj_data("abc")), True),
    ("wrapper, arguments an object", _aj(_aj_data({"a": 1})), True),
    ("wrapper, globalid int", _aj(_aj_data([{"_aj_globalid": 5}])), True),
    ("wrapper, serialized without value", _aj(_aj_data([{"_aj_serialized": "x"}])), True),
    ("wrapper, ruby2 keywords", _aj(_aj_data([{"_aj_ruby2_keywords": ["a"], "a": 1}])), True),
    ("wrapper, keyword not an identifier", _aj(_aj_data([{"_aj_ruby2_keywords": [], "not an id!": 1}])), True),
    ("wrapper, 1,000-deep arguments", _aj(_aj_data([Raw(nested(1_000))])), True),
    ("wrapper, wrapped int", _aj(_aj_data([1]), wrapped=5), False),
    ("wrapper, wrapped set, data empty", _aj({}, wrapped=RAILS_CLASS), True),
    ("wrapper, executions abc", _aj(_aj_data([1], executions="abc")), True),
    ("Sidekiq wrapper, lone surrogate argument", {"class": activejob.SIDEKIQ_WRAPPER,
                                                  "args": [_aj_data(["\ud800"])]}, True),
]  # fmt: skip


def members(
    where: str,
    now: float,
    *,
    flavours: tuple[bool, ...] = (True, False),
    huge_mb: tuple[int, ...] = (1, 5),
) -> list[Member]:
    """The whole corpus for one place (``where`` makes markers, and most bytes, unique to it).

    ``flavours``: for each payload variation, a job that fails (its failure must be recorded)
    and/or one that succeeds. ``huge_mb``: the sizes of the huge valid payloads.
    """
    out: list[Member] = []
    tag = where.encode()

    def raw_member(name: str, raw: bytes) -> None:
        out.append(Member(name, raw, reject=True))

    def job_member(
        name: str,
        changes: dict[str, Any],
        fail: bool,
        *,
        reject: bool = False,
        accept: bool = False,
        runnable: bool = True,
        ascii: bool = False,
        prefix: bytes = b"",
    ) -> None:
        flavour = "fails" if fail else "succeeds"
        marker = f"{name} [{flavour}]@{where}"
        if not runnable and "retry" not in changes:
            # Straight to the dead set when it fails: a retry would come due (15 s) and run again
            # while a slow test still watches, which is not what these members are about.
            changes = {**changes, "retry": 0}
        doc = payload(marker, fail, now, changes)
        out.append(
            Member(
                f"{name} [{flavour}]",
                prefix + encode(doc, ascii),
                marker,
                reject=reject,
                accept=accept,
                runnable=runnable,
                fails=fail,
                queue=_usable_queue(doc),
            )
        )

    # Not a payload at all.
    valid = encode(payload(f"valid@{where}", True, now))
    raw_member("empty string", b"")
    raw_member("whitespace only", b" \t\r\n ")
    raw_member("invalid JSON: truncated object", b'{"class":"Hostile::Job","args":[' + tag)
    raw_member("invalid JSON: bare words", b"not json at all " + tag)
    raw_member("invalid JSON: trailing comma", b'{"class":"Hostile::Job","args":[1,],"q":"' + tag + b'"}')
    raw_member("invalid JSON: trailing garbage", valid + b" x")
    raw_member("invalid JSON: two objects", b'{"a":"' + tag + b'"}{}')
    raw_member("invalid JSON: single quotes", b"{'class': 'Hostile::Job', 'args': [], 'w': '" + tag + b"'}")
    raw_member(
        "invalid JSON: raw NUL inside a string",
        b'{"class":"Hostile::Job","args":["\x00"],"w":"' + tag + b'"}',
    )
    raw_member("invalid JSON: raw newline inside a string", b'{"class":"Hostile::Job","args":["a\nb"]}')
    raw_member("invalid JSON: 2 MB, truncated", valid[:-1] + b',"pad":"' + b"p" * 2_000_000)
    raw_member("invalid JSON: 100,000 unclosed brackets", b"[" * 100_000 + tag)
    raw_member("JSON list", b'["Hostile::Job",[1],"' + tag + b'"]')
    raw_member("JSON string", json.dumps(f"Hostile::Job {where}").encode())
    raw_member("JSON number", b"42")
    raw_member("JSON float", b"-0.5e-7")
    raw_member("JSON null", b"null")
    raw_member("JSON true", b"true")
    raw_member("JSON empty object", b"{}")
    raw_member("JSON empty list", b"[]")
    raw_member("JSON bare NaN", b"NaN")
    raw_member("JSON 100,000-deep lists", nested(100_000).encode())
    raw_member(
        "invalid UTF-8: continuation byte", b'{"class":"Hostile::Job","args":["\x80"],"w":"' + tag + b'"}'
    )
    raw_member("invalid UTF-8: 0xff 0xfe", b"\xff\xfe" + tag)
    raw_member("invalid UTF-8: overlong slash", b'{"class":"Hostile::Job","args":["\xc0\xaf"]}')
    raw_member("invalid UTF-8: CESU-8 surrogate", b'{"class":"Hostile::Job","args":["\xed\xa0\x80"]}')
    raw_member("invalid UTF-8: truncated sequence", b'{"class":"Hostile::Job","args":["\xe2\x82')
    raw_member("Latin-1 text", b'{"class":"Hostile::Job","args":["caf\xe9"]}')
    raw_member("a NUL byte", b"\x00")
    raw_member("binary: every byte value", bytes(range(256)) + tag)
    raw_member("binary: gzip header", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + tag)
    raw_member("pickle bytes", b"\x80\x04\x95\x0f\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s." + tag)
    raw_member("Ruby Marshal bytes", b'\x04\x08{\x06I"\nclass\x06:\x06ET' + tag)

    for name, changes in NOT_STRICT:
        job_member(name, changes, True, reject=True)
    for name, changes in NOT_A_JOB:
        job_member(name, changes, True, reject=True, runnable=False)
    job_member("args 5 MB, NaN at the end", {"args": ["n" * 5_000_000, Raw("NaN")]}, True, reject=True)

    for fail in flavours:
        for field, variants in WRONG_TYPES.items():
            for label, value in variants:
                job_member(f"{field} {label}", {field: value}, fail)
        for name, changes in ENCRYPTED_SHAPES:
            job_member(name, {"encrypt": True, **changes}, fail, ascii=True)
        # Odd but valid JSON.
        job_member("lone high surrogate in args", {"args": ["\ud800"]}, fail, ascii=True)
        job_member("lone low surrogate in args", {"args": ["a\udfffb"]}, fail, ascii=True)
        job_member("lone surrogate in a key", {"args": [{"\ud800": 1}]}, fail, ascii=True)
        job_member("surrogate pair, escaped", {"args": ["\U0001f600"]}, fail, ascii=True, accept=True)
        job_member("escaped NUL in args", {"args": ["a\u0000b"]}, fail, accept=True)
        job_member("1e400 in args (a float overflow)", {"args": [Raw("1e400")]}, fail)
        job_member("1e-400 in args (underflow to 0)", {"args": [Raw("1e-400")]}, fail, accept=True)
        job_member("-0.0 in args", {"args": [-0.0]}, fail, accept=True)
        job_member("400-digit integer in args", {"args": [Raw("9" * 400)]}, fail)
        job_member("5,000-digit integer in args", {"args": [Raw("9" * 5000)]}, fail)
        job_member("duplicate keys in an argument", {"args": [Raw('{"k":1,"k":2}')]}, fail)
        job_member("deep but legal: 98 levels", {"args": [Raw(nested(96))]}, fail, accept=True)
        job_member("100 levels (Ruby's max_nesting)", {"args": [Raw(nested(98))]}, fail)
        job_member("101 levels (past Ruby's max_nesting)", {"args": [Raw(nested(99))]}, fail)
        job_member("UTF-8 BOM before the object", {}, fail, prefix=b"\xef\xbb\xbf")
        job_member("100,000 arguments", {"args": list(range(100_000))}, fail, accept=True)
        for mb in huge_mb:
            job_member(f"{mb} MB string argument", {"args": ["h" * (mb * 1_000_000)]}, fail, accept=True)
        for name, changes, runnable in ACTIVEJOB:
            job_member(name, changes, fail, runnable=runnable, ascii=True)
        # Unique jobs: a worker reads unique_until of a job with unique_for to release its lock.
        for label, until in (("int", 5), ("list", ["start"]), ("unknown word", "finish"), ("object", {})):
            job_member(f"unique_until {label}", {"unique_for": 600, "unique_until": until}, fail)
    for cls in UNKNOWN_CLASSES:
        label = f"unknown class {cls[:40]!r}" + (f" ({len(cls):,} chars)" if len(cls) > 40 else "")
        job_member(label, {"class": cls}, True, runnable=False)
    job_member(
        "lone surrogate in the class name", {"class": "Hostile\ud800"}, True, runnable=False, ascii=True
    )
    return out


#: Scores for due entries: the poller must promote every one (or bury it), never stop at one.
DUE_SCORES = (-INF, -1e300, -5.5, -0.0, 0.0, 1e-9)
#: Scores no poller may promote yet: the entry stays where it is.
FUTURE_SCORES = (INF, 1e300, 4102444800.0)  # the last one: 2100-01-01


def odd_scores(now: float) -> list[float]:
    """Scores a sorted-set page must show and open: negative, zero, huge, infinite, now."""
    return [*DUE_SCORES, now - 30, now, now + 3600, 2.0**53 + 1, *FUTURE_SCORES]


# Processes, queue names and stats --------------------------------------------------------------

ODD_NAMES: list[bytes] = [
    b"ends with newline\n",
    b"",
    b"n" * 10_000,
    b"\xff\xfe binary \x00",
    b"spaces and \xc3\xbc",
    b"a/b",
    b"..",
    b"%2F",
    b"?q=1#frag",
    b"<b>bold</b>",
]

#: Processes as no worker writes them: (identity, process hash, busy-work hash).
ODD_PROCESSES: list[tuple[bytes, dict[str, Any] | str | None, dict[str, Any] | None]] = [
    (b"odd:1:info-not-json", {"info": "{not json", "busy": "1", "beat": "1"}, None),
    (b"odd:2:info-a-list", {"info": "[]", "busy": "0", "beat": "nan"}, None),
    (
        b"odd:3:wrong-types",
        {
            "info": json.dumps({"hostname": 5, "pid": "abc", "started_at": "nan", "queues": "abc", "labels": 5,
                                "concurrency": "x", "tag": ["t"], "version": {}, "embedded": "yes",
                                "weights": "w", "capsules": []}),
            "busy": "abc", "beat": "-inf", "quiet": "maybe", "rss": "x", "rtt_us": "1.5", "concurrency": "lots",
        },
        None,
    ),
    (b"odd:4:huge-numbers", {"info": '{"pid":' + "9" * 400 + ',"started_at":1e400}', "busy": "9" * 400,
                             "beat": "1e400", "rss": "-5", "rtt_us": "9" * 400, "concurrency": "-1"}, None),
    (b"odd:5:busy", {"info": "{}", "busy": "3", "beat": "NOW"}, {
        "t1": "not json",
        "t2": "[]",
        "t3": json.dumps({"queue": ["q"], "payload": {"class": "X", "args": []}, "run_at": "abc"}),
        "t4": json.dumps({"queue": "default", "payload": 5, "run_at": 1e300}),
        "t5": json.dumps({"queue": "default", "payload": '{"class":"X","args":[NaN]}', "run_at": -1}),
        "t6": '{"queue":"default","payload":"{}","run_at":NaN}',
        "t7": json.dumps({"queue": "default", "payload": "[" * 50_000, "run_at": 1}),
        "t8": b"\xff\xfe",
        "": json.dumps({"queue": "default", "payload": "", "run_at": "9" * 400}),
    }),
    (b"", {"info": "{}", "busy": "1", "beat": "NOW"}, {"t": "{}"}),
    (b"\n", {"info": "{}", "busy": "0", "beat": "NOW"}, None),
    (b"\xff\xfe:1:binary", {"info": "{}", "busy": "0", "beat": "NOW"}, None),
    (b"p" * 10_000, {"info": "{}", "busy": "0", "beat": "NOW"}, None),
    (b"odd:6:hash-expired", None, {"t": "{}"}),
    (b"odd:7:key-holds-a-list", "LIST", None),
]  # fmt: skip


def load_odd_processes_queues_and_stats(r: Any, now: float) -> None:
    """Junk in every key the heartbeat, the poller's cleanup and the stats pages read."""
    for identity, process, work in ODD_PROCESSES:
        r.sadd(keys.PROCESSES, identity)
        if process == "LIST":
            r.rpush(identity, b"x")
        elif isinstance(process, dict):
            r.hset(identity, mapping={k: (repr(now) if v == "NOW" else v) for k, v in process.items()})
        if work:
            r.hset(identity + b":work", mapping=work)
    for name in ODD_NAMES:
        r.sadd(keys.QUEUES, name)
        r.sadd(keys.PAUSED, name)
        r.rpush(b"queue:" + name, b"not json", b'{"class":"X","args":[NaN]}')
    today = datetime.now(UTC)
    r.set(keys.STAT_PROCESSED, "abc")
    r.set(keys.STAT_FAILED, "1e400")
    r.set(keys.STAT_EXPIRED, "-" + "9" * 400)
    r.set(keys.daily_stat("processed", today.date().isoformat()), "x")
    r.set(keys.daily_stat("failed", today.date().isoformat()), "-5")
    minute = keys.metrics_minute(today)
    r.hset(
        minute,
        mapping={"Hostile::Good|p": "abc", "|p": "1", "x|ms": "1e400", "Evil\nClass|f": "3", "nobar": "1"},
    )
    r.hset(keys.metrics_rollup(today), mapping={"Hostile::Good|p": "-" + "9" * 400})
    r.set(keys.histogram("Hostile::Good", today), b"\xff\xff\xff")
    r.set(keys.LEADER, b"\xff\xfe")


# Hypothesis strategies ----------------------------------------------------------------------------

#: Strings the default text strategy never draws: lone surrogates.
_SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udbffz", "\ud800\ud800"])


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value Python can write, NaN and Infinity included, lone surrogates too."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=-(10**400), max_value=10**400)
        | st.floats()
        | st.text(max_size=20)
        | _SURROGATES
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=max_leaves,
    )


@functools.cache
def sidekiq_payloads() -> tuple[dict[str, Any], ...]:
    """Real Sidekiq 6.4.1 payloads (``tests/vectors``): a plain job and an ActiveJob wrapper."""
    from tests import vectors

    plain = json.loads(vectors.raw("queue_job.json"))
    wrapped = json.loads(vectors.raw("queue_job_activejob.json"))
    # Runnable here, on queues the workers read; everything else is as Ruby wrote it.
    plain.update({"class": HOSTILE_CLASS, "queue": "default"})
    wrapped.update({"wrapped": RAILS_CLASS, "queue": "default"})
    wrapped["args"][0].update({"job_class": RAILS_CLASS, "queue_name": "default"})
    return plain, wrapped


@dataclass(frozen=True)
class Draft:
    """A generated member before it gets its marker (unique per Hypothesis example)."""

    kind: str
    value: Any
    fail: bool = False
    ascii: bool = True

    def build(self, marker: str) -> Member:
        name = f"generated {self.kind} {marker}"
        if self.kind == "bytes":
            return Member(name, self.value, reject=True)
        if self.kind == "mangled":
            # A real payload (marker first, so a cut rarely loses it) cut short and/or with bytes
            # spliced in. Most results are not JSON; one that still is an object is a job.
            doc = {"corpus": marker, **sidekiq_payloads()[0], "corpus_fail": self.fail}
            base = encode(doc)
            cut, splice = self.value
            at = int(len(base) * cut)
            raw = base[:at] + splice + base[at + len(splice) :]
            decoded = strict_loads(raw)
            if not isinstance(decoded, dict):
                return Member(name, raw, reject=True)
            found = decoded.get("corpus")
            return Member(name, raw, found if isinstance(found, str) else None,
                          runnable=decoded.get("class") == HOSTILE_CLASS, fails=decoded.get("corpus_fail") is True,
                          queue=_usable_queue(decoded))  # fmt: skip
        if self.kind == "json":
            value = self.value
            if not isinstance(value, dict):
                return Member(name, encode(value, self.ascii), reject=True)
            doc = {**value, "corpus": marker, "corpus_fail": self.fail}
            runnable = doc.get("class") in (HOSTILE_CLASS, RAILS_CLASS)
            return Member(name, encode(doc, self.ascii), marker, runnable=runnable, fails=self.fail,
                          queue=_usable_queue(doc))  # fmt: skip
        # "sidekiq": a real payload with some fields replaced by random JSON values.
        which, changes = self.value
        doc = json.loads(json.dumps(sidekiq_payloads()[which]))
        doc.update(changes)
        doc["corpus"] = marker
        doc["corpus_fail"] = self.fail
        runnable = doc.get("class") in (HOSTILE_CLASS, activejob.RAILS_WRAPPER)
        return Member(name, encode(doc, self.ascii), marker, runnable=runnable, fails=self.fail,
                      queue=_usable_queue(doc))  # fmt: skip


#: Fields a mutation may replace: every field of the real payloads and a few Sidekiq adds later.
MUTABLE_FIELDS = (
    "class", "args", "jid", "queue", "retry", "created_at", "enqueued_at", "wrapped", "retry_count",
    "backtrace", "error_message", "error_class", "failed_at", "retried_at", "error_backtrace",
    "retry_for", "retry_queue", "dead", "recovered", "tags", "timeout",
)  # fmt: skip


def drafts() -> st.SearchStrategy[Draft]:
    """Random bytes, mangled real payloads, random JSON values, and real Sidekiq payloads with
    random fields replaced by random JSON values."""
    flags = {"fail": st.booleans(), "ascii": st.booleans()}
    return st.one_of(
        st.builds(Draft, kind=st.just("bytes"), value=st.binary(max_size=300)),
        st.builds(
            Draft,
            kind=st.just("mangled"),
            value=st.tuples(st.floats(min_value=0, max_value=1), st.binary(max_size=8)),
        ),
        st.builds(Draft, kind=st.just("json"), value=json_values(), **flags),
        st.builds(
            Draft,
            kind=st.just("sidekiq"),
            value=st.tuples(
                st.integers(0, 1),
                st.dictionaries(st.sampled_from(MUTABLE_FIELDS), json_values(6), min_size=1, max_size=3),
            ),
            **flags,
        ),
    )


def strict_loads(raw: bytes) -> Any:
    """What a strict reader makes of ``raw`` (RFC 8259, no NaN), or ``None`` if it is not JSON."""

    def refuse(token: str) -> Any:
        raise ValueError(token)

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except (ValueError, RecursionError):
        return None
