"""Reading Celery's call options (``countdown``, ``eta``, ``expires``, ``task_id``...) into times and ids.

Each reader accepts what Celery accepts, plus the ISO-8601 text a Celery message carries
in its headers (so ``wurk_drain_celery`` can hand an ``eta`` over as it found it), and
refuses anything else with the option's name. Naive datetimes are read as UTC, Celery's
default (``enable_utc``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django_wurk.celery.exceptions import UnsupportedOptionWarning
from django_wurk.core.config import QUEUE_NAME

#: A task id becomes the jid and part of a Redis key: text, without spaces or control characters.
MAX_TASK_ID = 255

#: Options Celery accepts that have no effect here, and why (warned about once per call site).
UNSUPPORTED = {
    "rate_limit": "use a rate limiter around the work instead",
    "time_limit": "jobs are not killed on a timer; the worker's shutdown timeout applies",
    "soft_time_limit": "jobs are not interrupted on a timer",
    "exchange": "there is no AMQP exchange; only queue= routes",
    "routing_key": "there is no AMQP routing; only queue= routes",
    "compression": "payloads are stored as plain JSON",
    "retry": "a push that cannot reach Redis raises EnqueueError (or is buffered, CLIENT_BUFFER)",
    "retry_policy": "a push that cannot reach Redis raises EnqueueError (or is buffered, CLIENT_BUFFER)",
    "link": "callbacks are not carried by this version; use chain() when it exists, or a batch",
    "link_error": "error callbacks are not carried by this version; use a batch's death callback",
    "shadow": "the dashboard shows the task's name",
    "headers": "Celery message headers have no place in a Sidekiq payload",
    "reject_on_worker_lost": "reliable fetch already re-runs a job whose worker died",
    "retry_on_worker_lost": "reliable fetch already re-runs a job whose worker died",
    "acks_on_failure_or_timeout": "a failed job is recorded (dead set) before it is acknowledged",
}
#: Accepted and meaningless here, silently (they describe how Celery talks to its broker).
IGNORED = frozenset({"producer", "connection", "add_to_parent", "typing", "acks_late", "publisher", "router"})


def warn_unsupported(name: str, where: str, stacklevel: int = 4) -> None:
    why = UNSUPPORTED.get(name, "it is not a Celery option this layer knows")
    warnings.warn(f"{where}: {name}= has no effect here ({why})", UnsupportedOptionWarning, stacklevel)


def task_id(value: Any) -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_TASK_ID
        or any(c.isspace() or not c.isprintable() for c in value)
    ):
        raise ValueError(
            f"task_id must be text of 1 to {MAX_TASK_ID} printable characters without spaces, got {value!r}"
        )
    return value


def moment(value: Any, name: str) -> float:
    """An absolute time (aware or naive-UTC datetime, or ISO-8601 text) as epoch seconds."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{name} must be a datetime or ISO-8601 text, got {value!r}") from None
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime or ISO-8601 text, got {value!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return float(value.timestamp())


def seconds(value: Any, name: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    return float(value)


def run_at(countdown: Any, eta: Any, now: float | None = None) -> float | None:
    """When to run, as epoch seconds; None for now. ``countdown`` wins over ``eta``, as in Celery."""
    now = time.time() if now is None else now
    if countdown is not None:
        return now + seconds(countdown, "countdown")
    if eta is not None:
        return moment(eta, "eta")
    return None


def expiry(expires: Any, now: float | None = None) -> float | None:
    """``expires`` (seconds from now, a timedelta, a datetime or ISO text) as an epoch."""
    if expires is None:
        return None
    now = time.time() if now is None else now
    if isinstance(expires, (datetime, str)):
        return moment(expires, "expires")
    return now + seconds(expires, "expires")


def check_step(options: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless a chain step's call options are ones ``apply_async`` takes."""
    if options.get("task_id") is not None:
        task_id(options["task_id"])
    run_at(options.get("countdown"), options.get("eta"))
    expiry(options.get("expires"))
    queue = options.get("queue")
    if queue is not None and (not isinstance(queue, str) or not QUEUE_NAME.match(queue)):
        raise ValueError(f"queue {queue!r} must be a name matching [a-zA-Z0-9_:.-]+")
