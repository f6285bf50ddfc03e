"""The payload codec against real Sidekiq 6.4.1 bytes and the spec's composed vectors."""

from __future__ import annotations

import base64
import json
import zlib
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_wurk.core import wire
from tests.vectors import JOB_VECTORS, raw

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
    # A bulk push's jids, from one read of randomness: the same shape, all different.
    jids = wire.new_jids(1000)
    assert len(set(jids)) == 1000
    assert all(len(j) == 24 and int(j, 16) >= 0 and j == j.lower() for j in jids)
    assert wire.new_jids(0) == []
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
        (10**400, None),  # no float holds it
        ("inf", None),
        ("nan", None),
        ([1], None),
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
    # FailJob buried by Sidekiq 6.4.1 (line-wrapped base64, 23 frames).
    payload = wire.loads(raw("dead_job_backtrace.json"))
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
        # Equal but not the same object, and encoded otherwise: compared by identity.
        _alike(3, p1={"retry": 1}),
        _alike(3, p2={"created_at": -0.0}, p0={"created_at": 0.0}),
        _alike(3, p1={"jid": 7}),
    ],
    ids=[
        "one",
        "bulk",
        "changed-queue",
        "extra-key",
        "no-jid",
        "reordered",
        "int-key",
        "odd-args",
        "equal-not-identical",
        "signed-zero",
        "int-jid",
    ],
)
def test_dumps_alike_gives_exactly_the_bytes_of_dumps(payloads: list[dict[str, object]]) -> None:
    assert wire.dumps_alike(payloads) == [wire.dumps(p) for p in payloads]  # type: ignore[arg-type]


def test_dumps_alike_refuses_nan_like_dumps() -> None:
    with pytest.raises(ValueError):
        wire.dumps_alike(_alike(3, p0={"created_at": float("nan")}))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        wire.dumps_alike(_alike(3, p1={"args": [float("inf")]}))  # type: ignore[arg-type]


# The decoding policy: what Ruby's JSON.parse accepts and JSON.generate can write back. -----


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[NaN]", "NaN is not a JSON number"),
        ("[Infinity]", "Infinity is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[1e400]", "1e400 is out of range"),
        ("[-1E+999]", "out of range"),
        ("[1" + "0" * 400 + ".5]", "out of range"),
    ],
)
def test_nan_infinity_and_overflowing_numbers_are_refused_like_rubys_json(text: str, reason: str) -> None:
    raw_payload = ('{"class":"X","args":' + text + "}").encode()
    with pytest.raises(wire.PayloadError) as err:
        wire.loads(raw_payload)
    assert reason in str(err.value) and err.value.error_class == "InvalidPayload"


def test_big_integers_are_kept_exactly() -> None:
    text = '{"class":"X","args":[' + "9" * 400 + "]}"
    assert wire.dumps(wire.loads(text.encode())) == text


def nested(depth: int, inner: str = "1") -> str:
    out = inner
    for level in range(depth):
        out = f"[{out}]" if level % 2 else '{"k":' + out + "}"
    return out


@pytest.mark.parametrize("depth", [1, 50, 98])
def test_nesting_up_to_rubys_limit_decodes_and_reencodes(depth: int) -> None:
    text = '{"class":"X","args":[' + nested(depth) + "]}"  # the object and args add two levels
    assert wire.dumps(wire.loads(text.encode())) == text
    assert not wire.too_deep(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        '{"class":"X","args":[' + nested(99) + "]}",  # 101 levels in all
        '{"class":"X","args":' + "[" * 100_000 + "]" * 100_000 + "}",
        "[" * 200_000,  # never closed: the parser would recurse just as deep before failing
        '{"class":"X","args":[' + "[]" * 500 + "[" * 150 + "]" * 150 + "]}",
        '{"class":"X","args":["\\\\",' + "[" * 101 + "]" * 101 + "]}",  # an escaped backslash ends the string
    ],
    ids=["101", "100000", "unclosed", "after-siblings", "after-escaped-backslash"],
)
def test_deeper_nesting_is_refused_before_the_parser_recurses(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def parser_reached(text: str) -> None:
        raise AssertionError("the JSON parser was called")

    monkeypatch.setattr(wire._decoder, "decode", parser_reached)
    assert wire.too_deep(text.encode())
    with pytest.raises(wire.PayloadError, match="nesting is too deep"):
        wire.loads(text.encode())


def test_brackets_inside_strings_do_not_count() -> None:
    text = '{"class":"X","args":["' + "[{" * 5000 + '", "\\"' + "]}" * 10 + '\\\\", "\\u005b"]}'
    payload = wire.loads(text.encode())
    assert payload["args"] == ["[{" * 5000, '"' + "]}" * 10 + "\\", "["]


@pytest.mark.parametrize("escape", ["\\ud800", "\\uDBFF", "\\udc00", "\\uDFFF"])
def test_lone_surrogates_are_refused(escape: str) -> None:
    with pytest.raises(wire.PayloadError, match="lone UTF-16 surrogate"):
        wire.loads(('{"class":"X","args":["a' + escape + 'b"]}').encode())


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    payload = wire.loads(b'{"class":"X","args":["\\ud83d\\ude00","\\\\ud800"]}')
    assert payload["args"] == ["\U0001f600", "\\ud800"]  # the second is an escaped backslash, then text
    assert wire.dumps(payload).encode("utf-8")


def test_a_str_holding_a_surrogate_is_refused() -> None:
    with pytest.raises(wire.PayloadError, match="not valid Unicode"):
        wire.loads('{"class":"X","args":["\udcff"]}')


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("-inf"), {1, 2}, object(), [[[]]] * 0 + [{"deep": None}]],
    ids=["nan", "inf", "set", "object", "fine"],
)
def test_dumps_fails_only_with_payload_error(value: Any) -> None:
    try:
        text = wire.dumps({"args": [value]})
    except wire.PayloadError as exc:
        assert "cannot be encoded as JSON" in str(exc)
        assert isinstance(exc, ValueError) and isinstance(exc, TypeError)  # what callers caught before
    else:
        assert json.loads(text) == {"args": [value]}


def test_dumps_turns_recursion_and_cycles_into_payload_error() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(wire.PayloadError, match="RecursionError"):
        wire.dumps(deep)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(wire.PayloadError, match="Circular reference"):
        wire.dumps(cycle)
    with pytest.raises(wire.PayloadError):
        wire.dumps_alike(_alike(3, p1={"args": [{1, 2}]}))


def test_loads_object_follows_the_same_policy() -> None:
    assert wire.loads_object(b'{"busy":1}') == {"busy": 1}
    for bad in (b'{"busy":NaN}', b"[1]", b"[" * 1000, b"\xff"):
        with pytest.raises(ValueError):
            wire.loads_object(bad)


def test_backtraces_are_read_under_the_policy_and_bounded() -> None:
    def encode(data: bytes) -> str:
        return base64.b64encode(zlib.compress(data)).decode("ascii")

    assert wire.decode_backtrace(encode(b'["a:1"]')) == ["a:1"]
    assert wire.decode_backtrace(encode(b"[" * 100_000 + b"]" * 100_000)) == []
    assert wire.decode_backtrace(encode(b'["' + b"x" * (wire.MAX_BACKTRACE_BYTES + 1) + b'"]')) == []
    assert wire.decode_backtrace(encode(b"[NaN]")) == []


def test_an_exception_that_cannot_be_printed_still_has_a_message() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert wire.error_message(Unprintable()) == "<unprintable Unprintable: its __str__ raised RuntimeError>"


# Properties: for any bytes, decoding returns what can be written back, or says why not. ---

#: Pieces of JSON and of the things that break it, so generated texts are often near-valid.
FRAGMENTS = [
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    '"',
    "\\",
    '\\"',
    "\\\\",
    "\\u",
    "d800",
    "dc00",
    "\\ud83d\\ude00",
    "\\ud800",
    "\\udfff",
    "\\u0041",
    "0",
    "1",
    "-",
    ".",
    "e",
    "E",
    "+",
    "400",
    "308",
    "9" * 40,
    "NaN",
    "Infinity",
    "-Infinity",
    "true",
    "false",
    "null",
    '"class"',
    '"args"',
    '"X"',
    " ",
    "\n",
    "é",
    "✓",
    "\x00",
    "\x7f",
]


def assert_policy_holds(raw_payload: bytes | str) -> None:
    try:
        payload = wire.loads(raw_payload)
    except wire.PayloadError as exc:
        assert str(exc) and exc.error_class
        return
    assert isinstance(payload, dict)
    text = wire.dumps(payload)  # never raises for what loads returned
    text.encode("utf-8")  # and is valid UTF-8 for Redis
    assert wire.loads(text) == payload  # and reads back the same


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_decode_to_something_writable_or_raise_payload_error(data: bytes) -> None:
    assert_policy_holds(data)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_any_near_json_text_decodes_to_something_writable_or_raises_payload_error(text: str) -> None:
    for candidate in (text, '{"class":"X","args":[' + text + "]}"):
        assert_policy_holds(candidate.encode("utf-8"))
        assert_policy_holds(candidate)


#: Any JSON value Python can produce, NaN, infinities and lone surrogates included.
ANY_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_VALUE, st.integers(min_value=0, max_value=120), st.booleans())
def test_any_python_json_decodes_to_something_writable_or_raises_payload_error(
    value: Any, depth: int, ascii_only: bool
) -> None:
    for _ in range(depth):
        value = [value]
    text = json.dumps({"class": "X", "args": [value]}, ensure_ascii=ascii_only, allow_nan=True)
    assert_policy_holds(text.encode("utf-8", "surrogatepass"))
    assert_policy_holds(text.encode("utf-8", "replace"))


#: What Ruby's JSON.generate can write: finite floats, valid Unicode, at most 100 levels.
RUBY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(RUBY_VALUE, st.integers(min_value=0, max_value=98))
def test_everything_ruby_could_write_is_accepted_byte_for_byte(value: Any, depth: int) -> None:
    for _ in range(depth):
        value = [value]
    text = wire.dumps({"class": "X", "args": [value]})  # two levels, plus depth, plus the value's own
    if wire.too_deep(text.encode()):
        return  # the value's own nesting took it past 100: refused, as Ruby refuses it
    assert wire.dumps(wire.loads(text.encode())) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(RUBY_VALUE | ANY_VALUE, min_size=1, max_size=5), st.sampled_from(["args", "jid"]))
def test_dumps_alike_is_dumps_byte_for_byte_or_fails_the_same_way(varying: list[Any], key: str) -> None:
    payloads = _alike(len(varying))
    for payload, value in zip(payloads, varying, strict=True):
        payload[key] = value
    try:
        expected: list[str] | None = [wire.dumps(p) for p in payloads]
    except wire.PayloadError:
        expected = None
    if expected is None:
        with pytest.raises(wire.PayloadError):
            wire.dumps_alike(payloads)
    else:
        assert wire.dumps_alike(payloads) == expected


# The fast reader (orjson) answers exactly as the policy written in Python does. -----------


def decided(decode: Any, raw: bytes) -> tuple[str, str]:
    """What a decoder made of ``raw``: the value as written back, or the refusal's reason."""
    try:
        value = decode(raw)
    except wire.PayloadError as exc:
        return ("refused", f"{exc.error_class}: {exc}")
    return ("read", wire.dumps(value))  # 1 and 1.0, or True and 1, are written differently


def assert_fast_reader_agrees(raw: bytes) -> None:
    assert decided(wire.decode_json, raw) == decided(wire.strict_decode_json, raw)


def test_the_fast_reader_is_installed() -> None:
    # A default dependency: without it the properties below would compare the policy with itself.
    assert wire._fast_loads is not None


@pytest.mark.parametrize(
    "raw",
    [
        b"18446744073709551616",  # orjson alone would make this a float
        b"-9223372036854775809",
        b'{"class":"X","args":[123456789012345678901234567890]}',
        b"[" * 101 + b"]" * 101,  # orjson alone would accept up to 1024 levels
        b"1e400",
        b'"\\ud800"',
        b"\xef\xbb\xbf{}",
        b'"\xed\xa0\x80"',
        b'{"a":1,"b":2,"a":3}',
        b"-0",
        b"[1e-400]",
    ],
)
def test_the_fast_reader_agrees_at_the_edges(raw: bytes) -> None:
    assert_fast_reader_agrees(raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_the_fast_reader_agrees_on_any_bytes(data: bytes) -> None:
    assert_fast_reader_agrees(data)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_the_fast_reader_agrees_on_near_json(text: str) -> None:
    for candidate in (text, '{"class":"X","args":[' + text + "]}"):
        assert_fast_reader_agrees(candidate.encode("utf-8"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_VALUE, st.integers(min_value=0, max_value=120), st.booleans())
def test_the_fast_reader_agrees_on_any_python_json(value: Any, depth: int, ascii_only: bool) -> None:
    for _ in range(depth):
        value = [value]
    text = json.dumps({"class": "X", "args": [value]}, ensure_ascii=ascii_only, allow_nan=True)
    assert_fast_reader_agrees(text.encode("utf-8", "surrogatepass"))
    assert_fast_reader_agrees(text.encode("utf-8", "replace"))
