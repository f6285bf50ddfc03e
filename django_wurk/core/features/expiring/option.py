"""The two payload keys of an expiring job, and how each is read.

``expires_in`` is the option a user sets: a duration in seconds. ``expires_at`` is what
the client middleware derives from it at push time, absolute epoch seconds (a float), and
what the server middleware compares with the clock. Both names, their types and the
origin of ``expires_at`` (the scheduled time, else the push) are Sidekiq Pro's, so a Ruby
Sidekiq Pro process and ours expire the same payload at the same moment.

Everything read back from a payload may have been written by anyone: a value these
functions cannot use reads as ``None``, and the middleware then treats the job as one
that does not expire (saying so in the log) rather than guessing a time for it.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from django_wurk.core.job import ABSOLUTE_EPOCH_THRESHOLD

#: The job option: seconds (or a ``timedelta``) the job may wait before it starts.
EXPIRES_IN = "expires_in"
#: The absolute deadline the client middleware writes: epoch seconds, a float.
EXPIRES_AT = "expires_at"
#: The job option: seconds from the first push (or an absolute time) after which the job,
#: whatever its retries, is never started again.
DEADLINE = "deadline"
#: What the client middleware derives from it at the first push: epoch seconds, a float.
DEADLINE_AT = "deadline_at"


def duration(value: Any) -> int | float | None:
    """``value`` as a usable duration in seconds, or ``None``: a real number > 0 and below
    Sidekiq Pro's limit.

    Sidekiq Pro refuses an ``expires_in`` above ``1_000_000_000``, taking it for an absolute
    time given by mistake; the bound here is the engine's one for such numbers (``retry_for``,
    ``perform_in``), 10^9 itself excluded. A huge integer is compared as it is (never turned
    into a float, which would overflow).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 < value < ABSOLUTE_EPOCH_THRESHOLD:  # NaN fails this too
        return None
    return int(value) if value == int(value) else float(value)


def check_expires_in(value: Any, where: str) -> int | float | None:
    """The ``expires_in`` option's check (at ``set()`` and at class definition).

    ``None`` is allowed, and means "does not expire": ``set(expires_in=None)`` turns off a
    class's default. A whole number of seconds is stored as an integer, as Ruby writes
    ``1.hour``.
    """
    if value is None:
        return None
    seconds = duration(value.total_seconds() if isinstance(value, timedelta) else value)
    if seconds is None:
        raise ValueError(
            f"{where}: expires_in must be seconds (or a timedelta) > 0 and below "
            f"{ABSOLUTE_EPOCH_THRESHOLD:_} (a duration, not a time), got {value!r}"
        )
    return seconds


def deadline(value: Any) -> float | None:
    """A payload's ``expires_at`` (or ``at``) as epoch seconds, or ``None`` if it cannot be one.

    A real number > 0 that a float can hold (Ruby's ``Time.at`` takes any number, but a
    deadline at or before 1970, or past a float's range, can only be garbage, and running
    such a job is the safe reading). Text, even numeric text, is refused: Sidekiq Pro could
    not compare it with a time either.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def absent(value: Any) -> bool:
    """Ruby's falsiness: ``nil`` and ``false`` mean the key is not set (never ``0``)."""
    return value is None or value is False


def check_deadline(value: Any, where: str) -> int | float | None:
    """The ``deadline`` option's check (at ``set()`` and at class definition).

    Seconds (or a ``timedelta``) > 0 count from the first push; an aware ``datetime``, or a
    number of seconds from 10^9 on (the engine's rule for ``perform_in``), is an absolute
    time, stored as epoch seconds. ``None``: no deadline (``set(deadline=None)``).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(
                f"{where}: deadline needs an aware datetime (naive times are ambiguous across servers), "
                f"got {value!r}"
            )
        return value.timestamp()
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(
            f"{where}: deadline must be seconds (or a timedelta) > 0 from the first push, or an aware "
            f"datetime, got {value!r}"
        )
    return int(value) if float(value).is_integer() else float(value)


def deadline_from(value: Any, now: float) -> float | None:
    """A payload's ``deadline`` as the absolute ``deadline_at`` of a job first pushed ``now``,
    or ``None`` when it cannot be one (another producer's value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value >= ABSOLUTE_EPOCH_THRESHOLD:
        return deadline(value)
    seconds = duration(value)
    return None if seconds is None else float(now + seconds)
