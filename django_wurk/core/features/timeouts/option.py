"""The ``timeout`` job option: how long one attempt of a job may run, in seconds.

Stored in the payload under ``timeout`` (the key wurk's Ruby jobs use too), so the limit
travels with the job: a retry, a scheduled job or a job pushed by another producer is held
to the limit it was pushed with. A value that is not a usable number of seconds (another
producer's garbage) reads as ``None``: the job runs without a limit, and the watchdog says so.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

#: The job option and payload key.
TIMEOUT = "timeout"
#: The soft limit's: at it ``SoftTimedOut`` is raised in the job, which may catch it.
SOFT_TIMEOUT = "soft_timeout"
#: Longer than this is a mistake, not a limit (the engine's bound for durations, ~31 years).
MOST = 1_000_000_000


def seconds(value: Any) -> float | None:
    """A payload's ``timeout`` as seconds > 0, or ``None`` when it sets no usable limit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        limit = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return limit if math.isfinite(limit) and 0 < limit < MOST else None


def check_timeout(value: Any, where: str, name: str = TIMEOUT) -> int | float | None:
    """The option's check at ``set()`` and class definition; ``None`` turns a default off."""
    if value is None:
        return None
    number = value.total_seconds() if isinstance(value, timedelta) else value
    if seconds(number) is None:
        raise ValueError(
            f"{where}: {name} must be seconds (or a timedelta) > 0 and below {MOST:_}, got {value!r}"
        )
    return int(number) if number == int(number) else float(number)


def check_soft_timeout(value: Any, where: str) -> int | float | None:
    return check_timeout(value, where, SOFT_TIMEOUT)


def absent(value: Any) -> bool:
    """Ruby's falsiness: ``nil`` and ``false`` set no timeout."""
    return value is None or value is False
