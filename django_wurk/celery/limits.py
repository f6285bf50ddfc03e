"""Celery's ``time_limit``, ``soft_time_limit`` and ``rate_limit``, on wurk's timeouts and limiters.

``time_limit`` becomes the job's ``timeout`` and ``soft_time_limit`` its ``soft_timeout``
(payload keys the timeouts feature reads, so a retry keeps them): the watchdog raises
``TimeLimitExceeded`` and ``SoftTimeLimitExceeded`` (``django_wurk.celery.exceptions``) in the
task, because the Celery job class names them as its timeout errors.

``rate_limit`` (``"10/s"``, ``"100/m"``, ``"1000/h"``, or a number per second, Celery's syntax)
becomes a sliding-window limiter named after the task. Celery's limit holds per worker
process; this one holds across every worker sharing the Redis, which is what a limit on an
outside API needs. A run the window refuses waits up to ``RATE_WAIT`` seconds in the worker
thread, then is put back in the schedule set for about one interval, and never dies of it.
"""

from __future__ import annotations

import random
import re
from datetime import timedelta
from typing import Any

from django_wurk.celery.exceptions import ImproperlyConfigured
from django_wurk.core.features.limiters import Limiter, window
from django_wurk.core.features.timeouts.option import MOST
from django_wurk.core.wire import Payload

#: Celery's rate units: per second, minute, hour.
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([smh]))?\s*$")
#: How long a worker thread waits for the window before the run is rescheduled.
RATE_WAIT = 5.0
#: A rate-limited Celery task is never sent to the dead set for being rate limited.
RESCHEDULE_FOREVER = 1_000_000


def limit_seconds(value: Any, name: str, where: str) -> float | None:
    """A ``time_limit``/``soft_time_limit`` as seconds > 0; None (or 0, Celery's "none") for no limit."""
    if value is None:
        return None
    number = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number < MOST:
        raise ImproperlyConfigured(f"{where}: {name} must be seconds >= 0 (or a timedelta), got {value!r}")
    return float(number) or None


def parse_rate(value: Any, where: str) -> tuple[int, float] | None:
    """Celery's ``rate_limit`` as ``(count, seconds)``; None for no limit (None, 0, ``"0/s"``).

    A fractional rate (``"0.5/s"``) is read as whole calls over a longer window (1 per 2 s).
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        raise ImproperlyConfigured(f"{where}: rate_limit must be text like '10/s', got {value!r}")
    match = RATE.match(text)
    if not match:
        raise ImproperlyConfigured(
            f"{where}: rate_limit must be '<number>/s', '/m' or '/h' (Celery's syntax), got {value!r}"
        )
    amount, period = float(match.group(1)), UNITS[match.group(2) or "s"]
    if amount <= 0:
        return None
    if amount < 1:
        return 1, period / amount
    return int(amount), period * (int(amount) / amount)


def _backoff(period: float) -> Any:
    def backoff(limiter: Limiter | None, payload: Payload, exc: BaseException) -> float:
        # About one window later, spread so the refused runs do not come back together.
        return period * random.uniform(0.5, 1.5)

    return backoff


def rate_limiter(task_name: str, value: Any, where: str) -> Limiter | None:
    """The window limiter of a task's ``rate_limit``, or None without one."""
    rate = parse_rate(value, where)
    if rate is None:
        return None
    count, period = rate
    name = "celery:" + re.sub(r"[^A-Za-z0-9_\-:.#@]", "_", task_name)[:190]
    return window(
        name,
        count,
        period,
        wait_timeout=min(RATE_WAIT, 2 * period),
        reschedule=RESCHEDULE_FOREVER,
        backoff=_backoff(period),
    )
