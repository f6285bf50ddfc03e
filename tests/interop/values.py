"""Argument values for the wire checks, and a comparison that tells JSON types apart."""

from __future__ import annotations

from typing import Any

#: One of each JSON shape that has bitten a cross-language queue: ints around 2^53 and past
#: 2^64 (Ruby Bignum, exact in Python), floats needing all 17 digits or an exponent (Ruby
#: writes ``1.0e-07`` where Python writes ``1e-07``), non-ASCII and escaped text, nesting.
SAMPLES: list[Any] = [
    0,
    -2,
    2**53 - 1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    2**64 + 1,
    10**30,
    0.1 + 0.2,
    3.25,
    -0.5,
    5.0,
    2.0**53,
    1e-7,
    1e16,
    1.5e300,
    "",
    "two",
    "ünïcødé ✓ 日本語 🎉",
    'quote " backslash \\ slash / tab \t newline \n nul \u0000 sep \u2028',
    None,
    True,
    False,
    [],
    {},
    {"nested": {"list": [1, None, True, False, 2.5, "x"], "empty": {}}, "ключ": [[]]},
    [[1, [2.0, [3, {"deep": None}]]]],
]


def typed(value: Any) -> Any:
    """``value`` with each scalar tagged by its JSON type, so ``1``, ``1.0`` and ``True`` differ."""
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    return (json_type(value), value)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"{value!r} is not a JSON value")


def shape(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """A payload's keys in order, each with its JSON type."""
    return [(key, json_type(value)) for key, value in payload.items()]
