"""The two job options of unique jobs, checked where every option is: at ``set(...)`` and
when a job class is defined, so ``unique_for="10m"`` fails at import, not at the push.

They are stored in the payload as Sidekiq Enterprise stores them: ``unique_for`` in whole
seconds when it is whole (``timedelta(minutes=10)`` is ``600``), ``unique_until`` as
``"start"`` or ``"success"``. ``unique_for=False`` is Sidekiq Enterprise's way to push one
job of a unique class without uniqueness (a "force push").
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

#: ``unique_until`` values: release the lock just before ``perform``, or after it returned.
START = "start"
SUCCESS = "success"
#: Longer than any lock should be held; also keeps the TTL a valid Redis EX value.
MAX_SECONDS = 10**9


def check_unique_for(value: Any, where: str) -> int | float | bool:
    if value is False:
        return False
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < MAX_SECONDS:
        raise ValueError(
            f"{where}: unique_for must be seconds (or a timedelta) greater than 0, or False, got {value!r}"
        )
    return int(value) if float(value).is_integer() else float(value)


def check_unique_until(value: Any, where: str) -> str:
    if value not in (START, SUCCESS):
        raise ValueError(f"{where}: unique_until must be {START!r} or {SUCCESS!r}, got {value!r}")
    return str(value)


#: The options unique jobs read, with their checks.
OPTIONS = {"unique_for": check_unique_for, "unique_until": check_unique_until}
