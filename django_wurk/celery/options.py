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

from django_wurk.celery.exceptions import ImproperlyConfigured, UnsupportedOptionWarning
from django_wurk.core.config import QUEUE_NAME
from django_wurk.core.features.timeouts.option import MOST

#: A task id becomes the jid and part of a Redis key: text, without spaces or control characters.
MAX_TASK_ID = 255

#: Options Celery accepts that have no effect here, and why (warned about once per call site).
#: None today: every option works or is refused (``REFUSED``, ``IGNORED``).
UNSUPPORTED: dict[str, str] = {}
#: Options Celery accepts that cannot be honoured here, and why: refused where they are given
#: (at the task's definition, the call, the signature's call), never accepted and ignored.
REFUSED = {
    "exchange": "there is no AMQP exchange; only queue= routes",
    "routing_key": "there is no AMQP routing; only queue= (or task_routes) routes",
    "compression": "payloads are stored as plain JSON",
    "retry": "a push that cannot reach Redis raises EnqueueError (or is buffered, CLIENT_BUFFER); "
    "it is not retried by the caller",
    "retry_policy": "a push that cannot reach Redis raises EnqueueError (or is buffered, CLIENT_BUFFER); "
    "it is not retried by the caller",
    "shadow": "the dashboard shows the task's name",
    "headers": "Celery message headers have no place in a Sidekiq payload",
    "reject_on_worker_lost": "reliable fetch always re-runs a job whose worker died (only True is accepted)",
    "retry_on_worker_lost": "reliable fetch always re-runs a job whose worker died (only True is accepted)",
    "acks_on_failure_or_timeout": "a failed job is always recorded (dead set) and then acknowledged "
    "(only True is accepted)",
    "acks_late": "reliable fetch acknowledges a job only once its outcome is recorded "
    "(only True is accepted)",
    "acks_on_failure": "a failed job is always recorded (dead set) and then acknowledged "
    "(only True is accepted)",
    "acks_on_timeout": "a timed-out job is always recorded (dead set) and then acknowledged "
    "(only True is accepted)",
    "throws": "an expected error is recorded like any other failure here; there is no quieter log for it",
    "resultrepr_maxsize": "results are stored whole in Celery's JSON record",
    "store_eager_result": "an eager run keeps its result in the EagerResult only",
    "pydantic": "arguments are kombu JSON here; validate them in the task",
    "backend": "results are written into wurk's Redis, in Celery's Redis result layout",
    "reply_to": "results are read from the task's result record, not a reply queue",
    "correlation_id": "results are read from the task's result record, by task id",
    "root_id": "each job stands on its own; the payload keeps no workflow ids",
    "parent_id": "each job stands on its own; the payload keeps no workflow ids",
    "group_id": "each job stands on its own; a group is a batch (group(...))",
    "group_index": "each job stands on its own; a group is a batch (group(...))",
    "chord": "a chord is built with chord(header)(body)",
    "stamped_headers": "Celery's stamping has no place in a Sidekiq payload",
    "stamps": "Celery's stamping has no place in a Sidekiq payload",
}
#: Of the refused options, those whose value True is what this layer always does: accepted.
ALWAYS = frozenset(
    {"reject_on_worker_lost", "retry_on_worker_lost", "acks_on_failure_or_timeout", "acks_late",
     "acks_on_failure", "acks_on_timeout"}
)  # fmt: skip
#: Accepted and meaningless here, silently (they describe how Celery talks to its broker).
IGNORED = frozenset({"producer", "connection", "add_to_parent", "typing", "publisher", "router"})


def warn_unsupported(name: str, where: str, stacklevel: int = 4) -> None:
    why = UNSUPPORTED.get(name, "it is not a Celery option this layer knows")
    warnings.warn(f"{where}: {name}= has no effect here ({why})", UnsupportedOptionWarning, stacklevel)


def refuse(name: str, value: Any, where: str) -> None:
    """Raise ``ImproperlyConfigured`` for an option that cannot be honoured, with the reason;
    return for one whose value is what happens here anyway (``acks_late=True``...) or None."""
    if value is None or value == () or (name in ALWAYS and value is True):
        return
    if name in UNSUPPORTED:
        warn_unsupported(name, where, stacklevel=5)
        return
    why = REFUSED.get(name, "it is not a Celery option this layer knows")
    raise ImproperlyConfigured(f"{where}: {name}={value!r} is not supported ({why})")


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
    for name in ("time_limit", "soft_time_limit"):
        value = options.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < MOST
        ):
            raise ValueError(f"{name} must be seconds >= 0, got {value!r}")
