"""The job options of debounce and throttle, each checked alone, then together.

``debounce`` (seconds to wait after the last push), ``debounce_max`` (seconds after the
first push the job fires at the latest), ``throttle`` (the slot length in seconds) and
``collapse_key`` (a text that names "the same job" instead of its arguments). Each is
checked where every option is, at ``set(...)`` and when the class is defined; the
combinations that cannot work (``check_together``) fail there too, naming the options.
``None`` turns an option off (``set(debounce=None)`` pushes one job of a debounced class
as a plain job).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

DEBOUNCE = "debounce"
DEBOUNCE_MAX = "debounce_max"
THROTTLE = "throttle"
COLLAPSE_KEY = "collapse_key"

#: Durations at or above this would be absolute times by the engine's rule (``perform_in``).
MAX_SECONDS = 1_000_000_000
#: A collapse key longer than this is a payload, not a name.
MAX_KEY_LENGTH = 1024


def seconds(value: Any, name: str, where: str, *, zero: bool) -> int | float | None:
    """``value`` (a number or a ``timedelta``) as seconds, or ``ValueError`` naming ``name``."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 if zero else value > 0)  # NaN fails both
        or not value < MAX_SECONDS
    ):
        least = ">= 0" if zero else "> 0"
        raise ValueError(
            f"{where}: {name} must be seconds (or a timedelta) {least} and below {MAX_SECONDS:_}, "
            f"got {value!r}"
        )
    return int(value) if float(value).is_integer() else float(value)


def check_debounce(value: Any, where: str) -> int | float | None:
    return seconds(value, DEBOUNCE, where, zero=True)


def check_debounce_max(value: Any, where: str) -> int | float | None:
    return seconds(value, DEBOUNCE_MAX, where, zero=True)


def check_throttle(value: Any, where: str) -> int | float | None:
    return seconds(value, THROTTLE, where, zero=False)


def check_collapse_key(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH:
        raise ValueError(
            f"{where}: {COLLAPSE_KEY} must be a non-empty string of at most {MAX_KEY_LENGTH} "
            f"characters, got {value!r}"
        )
    return value


OPTIONS = {
    DEBOUNCE: check_debounce,
    DEBOUNCE_MAX: check_debounce_max,
    THROTTLE: check_throttle,
    COLLAPSE_KEY: check_collapse_key,
}


def on(options: Mapping[str, Any], name: str) -> bool:
    return options.get(name) is not None


def check_together(options: Mapping[str, Any], where: str) -> None:
    """Refuse the combinations that cannot work, naming the options.

    Debounce and throttle answer "which push runs" in opposite ways (the last, the first);
    a unique lock would be taken by a push the collapse then replaces or refuses, so it is
    refused with either (as the seed refuses ``unique_for`` with a throttle).
    """
    debounce, throttle = on(options, DEBOUNCE), on(options, THROTTLE)
    if debounce and throttle:
        raise ValueError(f"{where}: {DEBOUNCE} and {THROTTLE} cannot be used together (choose one)")
    if on(options, DEBOUNCE_MAX):
        if not debounce:
            raise ValueError(f"{where}: {DEBOUNCE_MAX} needs {DEBOUNCE} (the wait after the last push)")
        if options[DEBOUNCE_MAX] < options[DEBOUNCE]:
            raise ValueError(
                f"{where}: {DEBOUNCE_MAX} ({options[DEBOUNCE_MAX]!r}) must be at least {DEBOUNCE} "
                f"({options[DEBOUNCE]!r})"
            )
    if on(options, COLLAPSE_KEY) and not (debounce or throttle):
        raise ValueError(f"{where}: {COLLAPSE_KEY} needs {DEBOUNCE} or {THROTTLE}")
    unique_for = options.get("unique_for")
    if (debounce or throttle) and unique_for is not None and unique_for is not False:
        used = DEBOUNCE if debounce else THROTTLE
        raise ValueError(
            f"{where}: {used} and unique_for cannot be used together (a collapsed push is already "
            "at most one job per burst or slot)"
        )
