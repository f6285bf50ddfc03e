"""Every route a secret could take out of a failing encrypted job, each checked with real runs.

A job raises in every shape its code could take: the secret as a message, an attribute
(flat, nested, a number, bytes, an object, a slot), in ``args``, in a built-in field
(``AttributeError.obj``, ``OSError.filename``, ``UnicodeDecodeError.object``), in the
attributes of a chained exception, in an exception group's members. Then each route out is
searched: what an error handler or a death handler can reach from the exception (walked as
a reporter like Sentry walks it: text, attributes, chains, groups, frame locals), the retry
and dead entries in Redis, the status record, the worker's log records, and a tracing span.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from django_wurk import Config, Job, Wurk, limiter
from django_wurk.core import keys, wire
from django_wurk.core.features.encryption import HIDDEN, EncryptedJobError
from django_wurk.core.features.encryption.settings import EncryptionSettings
from django_wurk.core.features.limiters.base import OverLimit
from django_wurk.core.features.status import status_key
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.test_encryption import KEY1, SECRET, dead, everything_in_redis, registered, retries, running  # noqa: F401 (a fixture)
from tests.test_tracing import spans  # noqa: F401 (a fixture)

#: A number only the secret bag holds, for the routes that carry numbers.
PAN = 4012888888881881


def leaks(blob: bytes | str) -> bool:
    text = blob if isinstance(blob, str) else blob.decode("utf-8", "replace")
    return SECRET in text or "card-of-test" in text or str(PAN) in text


class Declined(Exception):
    pass


class SlottedDeclined(Exception):
    __slots__ = ("card",)


class FormatsItsMessage(Exception):
    def __init__(self, card: str) -> None:
        super().__init__()
        self.card = card

    def __str__(self) -> str:
        return f"card {self.card} declined"


def throw(exc: BaseException) -> None:
    raise exc


def _with(exc: BaseException, **attributes: Any) -> BaseException:
    for name, value in attributes.items():
        setattr(exc, name, value)
    return exc


def _chained(bag: dict[str, Any], how: str) -> None:
    try:
        raise _with(Declined("inner"), card=bag["card"])
    except Declined as inner:
        if how == "cause":
            raise Declined("outer") from inner
        raise Declined("outer")  # noqa: B904 - the implicit context is the route tested


def _group(bag: dict[str, Any]) -> None:
    members: list[Exception] = []
    for member in (_with(Declined(f"card {bag['card']}"), card=bag["card"]), KeyError(bag["card"])):
        try:
            raise member
        except Exception as caught:
            caught.add_note(bag["card"])
            members.append(caught)
    raise ExceptionGroup(f"charging {bag['card']} failed", members)


def _bad_text(bag: dict[str, Any]) -> None:
    (bag["card"] + "\u00e9").encode().decode("ascii")


#: How a job's code could let its secret out, by name; each raises with ``bag`` somewhere in it.
SHAPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "message": lambda bag: throw(Declined(f"card {bag['card']} declined")),
    "attribute": lambda bag: throw(_with(Declined("declined"), card=bag["card"])),
    "nested attribute": lambda bag: throw(
        _with(Declined("declined"), details={"payments": [{"card": bag["card"]}]})
    ),
    "number attribute": lambda bag: throw(_with(Declined("declined"), pan=bag["pan"])),
    "bytes attribute": lambda bag: throw(_with(Declined("declined"), raw=bag["card"].encode())),
    "object attribute": lambda bag: throw(
        _with(Declined("declined"), request=types.SimpleNamespace(body=dict(bag)))
    ),
    "slot": lambda bag: throw(_with(SlottedDeclined("declined"), card=bag["card"])),
    "args": lambda bag: throw(Declined("declined", bag)),
    "message from attributes": lambda bag: throw(FormatsItsMessage(bag["card"])),
    "AttributeError.obj": lambda bag: getattr(types.SimpleNamespace(**bag), "cvc"),  # noqa: B009
    "OSError.filename": lambda bag: open(f"/nonexistent/{bag['card']}"),  # noqa: SIM115
    "UnicodeDecodeError.object": _bad_text,
    "KeyError": lambda bag: bag[f"missing {bag['card']}"],
    "cause's attribute": lambda bag: _chained(bag, "cause"),
    "context's attribute": lambda bag: _chained(bag, "context"),
    "exception group": _group,
}


class Raises(Job):
    wire_name = "enc.Raises"
    encrypt = True
    backtrace = True

    def perform(self, shape: str, bag: dict[str, Any]) -> None:
        secret = bag["card"]  # noqa: F841 - a local holding the secret, for reporters of locals
        SHAPES[shape](bag)


class Throttled(Job):
    """Raises ``OverLimit`` from a limiter with its own back-off: the limiter must survive concealment."""

    wire_name = "enc.Throttled"
    encrypt = True
    full: ClassVar[limiter.Limiter]

    def perform(self, bag: dict[str, Any]) -> None:
        raise OverLimit(type(self).full)


class HttpError(Exception):
    kept_when_encrypted = ("status",)

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class CallsAnApi(Job):
    """Its ``retry_in`` reads an attribute its exception class keeps."""

    wire_name = "enc.CallsAnApi"
    encrypt = True
    seen: ClassVar[list[tuple[type[BaseException], Any, Any]]] = []

    def perform(self, bag: dict[str, Any]) -> None:
        raise HttpError(503, f"no card {bag['card']}")

    def retry_in(self, count: int, exc: BaseException) -> int:
        type(self).seen.append((type(exc), getattr(exc, "status", None), getattr(exc, "body", None)))
        return 1000


JOBS = [Raises, Throttled, CallsAnApi]
for _cls in JOBS:
    registry.unregister(_cls.wire_name)


@pytest.fixture(autouse=True)
def encrypted_jobs() -> Iterator[None]:
    yield from registered(JOBS)


@pytest.fixture
def test_config(test_config: Config) -> Config:
    return test_config.with_section(EncryptionSettings(encryption_keys=(("1", KEY1),)))


def bag() -> dict[str, Any]:
    return {"card": SECRET, "pan": PAN}


def reachable(*roots: object) -> str:
    """Everything an error reporter could read from ``roots``, as text.

    Exceptions are expanded as reporters expand them: message, ``repr``, the formatted
    traceback (chains and group members included), every attribute (its own, its slots and
    the built-in fields, found with ``dir``), and the local variables of every frame of its
    traceback. Containers and objects with a ``__dict__`` are walked into.
    """
    out: list[str] = []
    seen: set[int] = set()

    def walk(value: object, depth: int) -> None:
        if id(value) in seen or depth > 6:
            return
        seen.add(id(value))
        if isinstance(value, (str, bytes, int, float, type(None))):
            out.append(repr(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k, depth + 1)
                walk(v, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, BaseException):
            expand(value)
        elif isinstance(value, (types.ModuleType, type, types.FunctionType, types.MethodType)):
            return
        elif hasattr(value, "__dict__"):
            out.append(object.__repr__(value))
            walk(vars(value), depth + 1)

    def expand(exc: BaseException) -> None:
        out.append(wire.error_message(exc))
        out.extend(traceback.format_exception(exc))
        with contextlib.suppress(Exception):  # a reporter shows what it can
            out.append(repr(exc))
        for name in dir(exc):
            if name.startswith("__") and name not in ("__cause__", "__context__", "__notes__", "__dict__"):
                continue
            try:
                attribute = getattr(exc, name)
            except Exception:
                continue
            if not isinstance(attribute, types.BuiltinMethodType | types.MethodType):
                walk(attribute, 0)
        tb = exc.__traceback__
        while tb is not None:
            walk(tb.tb_frame.f_locals, 3)  # what a reporter of locals shows: values, a level down
            tb = tb.tb_next

    for root in roots:
        walk(root, 0)
    return "\n".join(out)


class Failures:
    """Runs a job of every shape once in a real worker; what the handlers were given."""

    def __init__(self, wurk: Wurk, start: Callable[[], Launcher]) -> None:
        self.wurk, self.start = wurk, start
        self.reports: list[tuple[BaseException, dict[str, Any]]] = []
        self.deaths: list[tuple[dict[str, Any], BaseException]] = []
        wurk.error_handlers.append(lambda exc, ctx: self.reports.append((exc, ctx)))
        wurk.death_handlers.append(lambda payload, exc: self.deaths.append((payload, exc)))

    def run(self) -> dict[str, str]:
        """The jid of each shape, once every job has failed and every handler was told."""
        jids = {}
        for n, shape in enumerate(SHAPES):
            # Every other job has no retries left: the dead set and the death handlers see it.
            jids[shape] = Raises.set(track=True, retry=0 if n % 2 else 3).perform_async(shape, bag())
        self.start()
        r = self.wurk.redis
        wait_for(lambda: r.zcard(keys.RETRY) + r.zcard(keys.DEAD) == len(SHAPES), 20)
        wait_for(lambda: len(self.reports) == len(SHAPES) and len(self.deaths) == len(SHAPES) // 2)
        return jids


@pytest.fixture
def failed(wurk: Wurk, running: Callable[[], Launcher]) -> Failures:  # noqa: F811
    return Failures(wurk, running)


def test_error_and_death_handlers_reach_no_secret_from_any_exception(wurk: Wurk, failed: Failures) -> None:
    jids = failed.run()
    by_jid = {ctx["job"]["jid"]: (exc, ctx) for exc, ctx in failed.reports}
    leaking = [shape for shape, jid in jids.items() if leaks(reachable(*by_jid[jid]))]
    assert leaking == []
    leaking = [payload["jid"] for payload, exc in failed.deaths if leaks(reachable(payload, exc))]
    assert leaking == []
    # What is left is still worth reporting: the class where it can be kept, and the frames.
    for shape, jid in jids.items():
        exc = by_jid[jid][0]
        assert HIDDEN in str(exc) or isinstance(exc, EncryptedJobError), shape
        assert "perform" in [frame.name for frame in traceback.extract_tb(exc.__traceback__)], shape
    kinds = {shape: type(by_jid[jid][0]) for shape, jid in jids.items()}
    assert kinds["attribute"] is Declined and kinds["slot"] is SlottedDeclined
    assert kinds["OSError.filename"] is FileNotFoundError and kinds["AttributeError.obj"] is AttributeError
    assert kinds["message from attributes"] is EncryptedJobError
    group = by_jid[jids["exception group"]][0]
    assert isinstance(group, ExceptionGroup)
    assert [type(member) for member in group.exceptions] == [Declined, KeyError]


def test_retry_and_dead_entries_hold_no_secret(wurk: Wurk, r: Any, failed: Failures) -> None:
    jids = failed.run()
    entries = {entry["jid"]: entry for entry in [*retries(r), *dead(r)]}
    assert set(entries) == set(jids.values())
    for shape, jid in jids.items():
        entry = entries[jid]
        assert HIDDEN in entry["error_message"] or entry["error_class"] == "EncryptedJobError", shape
        assert not leaks(entry["error_message"]), shape
        assert not leaks("\n".join(wire.decode_backtrace(entry["error_backtrace"]))), shape
    assert not leaks(everything_in_redis(r))


def test_the_status_record_keeps_no_secret(wurk: Wurk, r: Any, failed: Failures) -> None:
    jids = failed.run()
    for shape, jid in jids.items():
        record = {k.decode(): v.decode() for k, v in r.hgetall(status_key(jid)).items()}
        assert record["state"] in ("retrying", "dead", "failed"), (shape, record)
        assert record.get("error") and not leaks(repr(record)), shape


def test_the_worker_logs_no_secret(wurk: Wurk, failed: Failures, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    failed.run()
    failures = [rec for rec in caplog.records if rec.getMessage().startswith("fail:")]
    assert len(failures) == len(SHAPES)
    for record in caplog.records:
        text = record.getMessage() + repr(record.args) + repr(vars(record))
        if record.exc_info:
            text += "".join(traceback.format_exception(*record.exc_info))
        assert not leaks(text), record.getMessage()


def test_a_tracing_span_records_no_secret(
    wurk: Wurk,
    failed: Failures,
    spans: InMemorySpanExporter,  # noqa: F811
) -> None:
    failed.run()
    processed = [s for s in spans.get_finished_spans() if s.name == "enc.Raises process"]
    assert len(processed) == len(SHAPES)
    for span in processed:
        assert span.events and span.status.description
        text = repr(span.status.description) + repr([(e.name, dict(e.attributes or {})) for e in span.events])
        assert not leaks(text)


# Attributes a class keeps ------------------------------------------------------------------


def test_a_rate_limited_encrypted_job_is_rescheduled_by_its_limiter(wurk: Wurk, r: Any) -> None:
    """Encryption meets limiters: the concealed ``OverLimit`` still names its limiter."""
    Throttled.full = limiter.concurrent("enc-throttled", 1, wait_timeout=0, backoff=lambda lim, p, e: 7)
    assert Throttled.full.acquire("held").admitted
    Throttled.perform_async(bag())
    [raw] = r.lrange("queue:default", 0, -1)
    wurk.execute(wire.loads(raw))
    [(member, at)] = r.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    entry = wire.loads(member)
    assert entry["overrated"] == 1 and r.zcard(keys.RETRY) == 0
    assert at - time.time() < 30  # the limiter's own 7 s back-off, not the default 300 s or more
    wurk.execute(entry | {"overrated": 20})
    [buried] = dead(r)
    assert buried["error_message"] == "rate_limited: enc-throttled"


def test_retry_in_reads_only_the_attributes_its_exception_class_keeps(
    wurk: Wurk,
    r: Any,
    running: Any,  # noqa: F811
) -> None:
    CallsAnApi.seen.clear()
    CallsAnApi.perform_async(bag())
    running()
    wait_for(lambda: r.zcard(keys.RETRY) == 1)
    assert CallsAnApi.seen == [(HttpError, 503, None)]
    assert not leaks(everything_in_redis(r))
