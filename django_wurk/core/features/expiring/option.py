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
from datetime import timedelta
from typing import Any

from django_wurk.core.job import ABSOLUTE_EPOCH_THRESHOLD

#: The job option: seconds (or a ``timedelta``) the job may wait before it starts.
EXPIRES_IN = "expires_in"
#: The absolute deadline the client middleware writes: epoch seconds, a float.
EXPIRES_AT = "expires_at"


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
