"""The payload codec against real Sidekiq 6.4.1 bytes and the spec's composed vectors."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest

from django_wurk.core import wire
from tests.vectors import JOB_VECTORS, VECTORS, raw

# One backtrace, encoded strictly (Sidekiq 7.2.3+/8.x) and wrapped every 60 characters (6.x).
BACKTRACE = ["app/jobs/hard_job.rb:7:in `perform'", "sidekiq/processor.rb:220:in `execute_job'"]
STRICT = "eJyLVkosKNDPyk8q1s9ILEqJB7L0ipKszK0y8xQSClKL0vKLctWVdJSKM1NSszML9QuK8pNTi4vzi0CqjIwMwOpSK1KTS0tSQZrVlWIBzP4dJw=="
WRAPPED = (
    "eJyLVkosKNDPyk8q1s9ILEqJB7L0ipKszK0y8xQSClKL0vKLctWVdJSKM1NS\n"
    "szML9QuK8pNTi4vzi0CqjIwMwOpSK1KTS0tSQZrVlWIBzP4dJw==\n"
)


@pytest.mark.parametrize("name", JOB_VECTORS)
def test_ruby_payloads_decode_and_reencode_byte_for_byte(name: str) -> None:
    stored = raw(name)
    payload = wire.loads(stored)
    assert isinstance(payload["class"], str) and isinstance(payload["args"], list)
    assert len(payload["jid"]) == 24
    # Same key order, same float digits, raw UTF-8: what we write back is what Ruby wrote.
    assert wire.dumps(payload).encode("utf-8") == stored


def test_our_jid_and_timestamps_have_rubys_shape() -> None:
    jid = wire.new_jid()
    assert len(jid) == 24 and int(jid, 16) >= 0 and jid == jid.lower()
    stamp = wire.now_stamp(wire.TimestampStyle.FLOAT_SECONDS, 1767225600.0)
    assert wire.dumps({"t": stamp}) == '{"t":1767225600.0}'  # a fraction, so Sidekiq 8 reads seconds
    assert wire.now_stamp(wire.TimestampStyle.INT_MILLISECONDS, 1767225600.123) == 1767225600123


def test_json_matches_ruby_generate() -> None:
    assert wire.dumps({"a": "é/<>", "b": [1, 2.5, None, True]}) == '{"a":"é/<>","b":[1,2.5,null,true]}'
    with pytest.raises(ValueError):
        wire.dumps({"x": float("nan")})


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1795967142.916798, 1795967142.916798),
        (1767225600123, 1767225600.123),  # Sidekiq 8 int ms
        (1767225600, 1767225600.0),  # small int: seconds
        ("1767225600.5", 1767225600.5),  # numeric string (Oj)
        (None, None),
        (True, None),
        ("soon", None),
    ],
)
def test_read_stamp_accepts_every_style(value: object, seconds: float | None) -> None:
    assert wire.read_stamp(value) == seconds


def test_backtrace_codec_matches_both_ruby_encodings() -> None:
    assert wire.encode_backtrace(BACKTRACE) == STRICT
    assert wire.decode_backtrace(STRICT) == BACKTRACE
    assert wire.decode_backtrace(WRAPPED) == BACKTRACE
    assert wire.decode_backtrace(BACKTRACE) == BACKTRACE  # very old raw array
    assert wire.decode_backtrace("not base64 at all!") == []
    assert wire.decode_backtrace(None) == []


def test_backtrace_of_real_ruby_dead_job_decodes_and_reencodes() -> None:
    # sidekiq-wire.md §12: FailJob buried by Sidekiq 6.4.1 (line-wrapped base64, 23 frames).
    spec = (VECTORS.parent / "spec" / "sidekiq-wire.md").read_text(encoding="utf-8")
    line = next(x for x in spec.splitlines() if x.startswith('{"retry":3,"queue":"default","backtrace":true'))
    payload = wire.loads(line)
    frames = wire.decode_backtrace(payload["error_backtrace"])
    assert len(frames) == 23
    assert frames[0].endswith("workers.rb:17:in `perform'")
    # Python's zlib gives Ruby's bytes; only the 60-column wrapping differs (readers accept both).
    assert wire.encode_backtrace(frames) == payload["error_backtrace"].replace("\n", "")


def test_error_message_is_truncated_and_valid_utf8() -> None:
    message = wire.error_message(ValueError("x" * 20_000))
    assert len(message) == 10_000
    assert wire.error_message(ValueError("bad \udcff surrogate")).encode("utf-8")


@pytest.mark.parametrize(
    ("raw_payload", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1,2]", "JSON list, not an object"),
        (b'{"args":[]}', "no 'class'"),
        (b'{"class":"X"}', "no 'args'"),
        (b'{"class":"X","args":{"a":1}}', "'args' is a dict"),
        (b'{"class":"X","args":["\xff"]}', "not valid UTF-8"),
    ],
)
def test_unrunnable_payloads_say_why(raw_payload: bytes, reason: str) -> None:
    with pytest.raises(wire.PayloadError) as err:
        wire.loads(raw_payload)
    assert reason in str(err.value)
    assert err.value.error_class == "InvalidPayload"


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ([datetime(2026, 1, 1)], "args[0]"),
        ([1, {"when": Decimal("1.5")}], "args[1]['when']"),
        ([{1: "x"}], "args[0] has a key 1"),
        ([[float("inf")]], "args[0][0]"),
        ([(1, object())], "args[0][1]"),
    ],
)
def test_non_json_native_arguments_are_named(args: list[object], where: str) -> None:
    with pytest.raises(TypeError) as err:
        wire.check_json_native(args)
    assert where in str(err.value)


def test_json_native_arguments_pass() -> None:
    wire.check_json_native([1, 2.5, "é", None, True, [1, {"a": [2]}]])


def test_display_class_prefers_wrapped() -> None:
    aj = json.loads(raw("queue_job_activejob.json"))
    assert wire.job_display_class(aj) == aj["wrapped"]
    assert wire.job_display_class({"class": "X", "display_class": "Y"}) == "Y"


def _alike(count: int, **changes: object) -> list[dict[str, object]]:
    """Payloads built as a bulk push builds them: one head, one timestamp, own args and jid."""
    head = {"retry": True, "queue": "default", "tags": ["ünï", "b"]}
    stamp = 1767225600.123456
    out = []
    for i in range(count):
        payload = dict(head)
        payload["args"] = [
            i,
            'ünïcødé ✓ "quoted" \\ \u2028',
            {"nested": [1.5, None, True, {"k": "v"}]},
            1e-07,
        ]
        payload["class"] = "shop.jobs.Ship"
        payload["jid"] = wire.new_jid()
        payload["created_at"] = stamp
        payload["enqueued_at"] = stamp
        out.append(payload)
    for index, change in changes.items():
        out[int(index.removeprefix("p"))].update(change)  # type: ignore[call-overload]
    return out


@pytest.mark.parametrize(
    "payloads",
    [
        _alike(1),
        _alike(5),
        # A middleware changed one payload's shared field, added a key, or dropped the jid.
        _alike(4, p2={"queue": "other"}),
        _alike(4, p1={"bid": "b-1"}),
        [*_alike(2), {k: v for k, v in _alike(1)[0].items() if k != "jid"}],
        # Another key order, and a first payload whose shared value is not JSON-shaped alike.
        [*_alike(2), dict(reversed(list(_alike(1)[0].items())))],
        [{1: "int key", "args": [], "jid": "j"}, {1: "int key", "args": [2], "jid": "k"}],
        _alike(3, p0={"args": "not a list"}),
    ],
    ids=["one", "bulk", "changed-queue", "extra-key", "no-jid", "reordered", "int-key", "odd-args"],
)
def test_dumps_alike_gives_exactly_the_bytes_of_dumps(payloads: list[dict[str, object]]) -> None:
    assert wire.dumps_alike(payloads) == [wire.dumps(p) for p in payloads]  # type: ignore[arg-type]


def test_dumps_alike_refuses_nan_like_dumps() -> None:
    with pytest.raises(ValueError):
        wire.dumps_alike(_alike(3, p0={"created_at": float("nan")}))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        wire.dumps_alike(_alike(3, p1={"args": [float("inf")]}))  # type: ignore[arg-type]
