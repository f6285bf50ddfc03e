"""Rails' ActiveJob on the Sidekiq wire: reading its wrapper payloads and writing them.

Rails enqueues a Sidekiq job of a wrapper class whose single argument is the ActiveJob
``serialize`` hash (``job_class``, ``job_id``, ``arguments``...). A Python job registered
under the ActiveJob class name (``wire_name = "HelloJob"``) runs such payloads: the wrapper
is looked through, and ActiveJob's argument encoding is undone so ``perform`` receives
plain values. A job declared with ``activejob = True`` is enqueued in the same shape, so
Rails' wrapper can run it on a Ruby worker.

Decisions: a Ruby keyword-arguments hash (``_aj_ruby2_keywords``) becomes Python keyword
arguments; symbol keys become strings (Python has no symbols); a GlobalID
(``{"_aj_globalid": "gid://app/User/1"}``) arrives as its string, since only Rails can
load the record; a custom-serialised value (``_aj_serialized``, e.g. a Time) arrives as
its ``value`` when it has one, else as the dict minus the marker.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from django_wurk.core.wire import Payload

#: Rails' adapter wrapper (Sidekiq 6.x-8.x all run it) and Sidekiq 8's own name.
RAILS_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
SIDEKIQ_WRAPPER = "Sidekiq::ActiveJob::Wrapper"
WRAPPERS = frozenset({RAILS_WRAPPER, SIDEKIQ_WRAPPER})

SYMBOL_KEYS = "_aj_symbol_keys"
RUBY2_KEYWORDS = "_aj_ruby2_keywords"
INDIFFERENT = "_aj_hash_with_indifferent_access"
GLOBALID = "_aj_globalid"
SERIALIZED = "_aj_serialized"
RESERVED_KEYS = frozenset({SYMBOL_KEYS, RUBY2_KEYWORDS, INDIFFERENT, GLOBALID, SERIALIZED})


def is_wrapped(payload: Payload) -> bool:
    return payload.get("class") in WRAPPERS


def job_data(payload: Payload) -> dict[str, Any] | None:
    """The ActiveJob hash inside a wrapper payload, or ``None`` if it is not one."""
    if not is_wrapped(payload):
        return None
    args = payload.get("args")
    if isinstance(args, list) and args and isinstance(args[0], dict):
        return args[0]
    return None


def job_name(payload: Payload) -> str | None:
    """The ActiveJob class a wrapper payload runs (``wrapped``, else ``job_class``)."""
    data = job_data(payload)
    if data is None:
        return None
    name = payload.get("wrapped") or data.get("job_class")
    return name if isinstance(name, str) else None


def arguments(payload: Payload) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments for ``perform``; plain payloads pass ``args`` through."""
    data = job_data(payload)
    if data is None:
        return payload["args"], {}
    raw = data.get("arguments", [])
    if not isinstance(raw, list):
        raise ValueError("ActiveJob 'arguments' is not a list")
    kwargs: dict[str, Any] = {}
    if raw and isinstance(raw[-1], dict) and RUBY2_KEYWORDS in raw[-1]:
        kwargs = deserialize(raw[-1])
        raw = raw[:-1]
    return [deserialize(a) for a in raw], kwargs


def deserialize(value: Any) -> Any:
    if isinstance(value, list):
        return [deserialize(v) for v in value]
    if not isinstance(value, dict):
        return value
    if GLOBALID in value:
        return value[GLOBALID]
    if SERIALIZED in value:
        if "value" in value:
            return deserialize(value["value"])
        return {k: deserialize(v) for k, v in value.items() if k != SERIALIZED}
    return {k: deserialize(v) for k, v in value.items() if k not in RESERVED_KEYS}


def serialize(value: Any, where: str = "args") -> Any:
    """Python values in ActiveJob's encoding: each hash says its keys are strings."""
    if isinstance(value, (list, tuple)):
        return [serialize(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in RESERVED_KEYS:
                raise TypeError(f"{where} uses the key {k!r}, which ActiveJob reserves")
            out[k] = serialize(v, f"{where}[{k!r}]")
        out[SYMBOL_KEYS] = []
        return out
    return value


def wrap(payload: Payload, locale: str = "en") -> Payload:
    """Rewrite a plain payload (before jid/timestamps) into Rails' wrapper shape.

    Keyword arguments (the plain payload's ``kwargs``) become what Rails writes for a Ruby
    call with keywords: a last hash whose ``_aj_ruby2_keywords`` lists its keys, which
    ActiveJob turns back into keyword arguments (and ``arguments`` above into Python ones).
    """
    name = payload["class"]
    queue = payload.get("queue", "default")
    arguments = serialize(payload["args"])
    kwargs = payload.get("kwargs")
    if kwargs:
        keywords = serialize(kwargs, "kwargs")
        del keywords[SYMBOL_KEYS]
        keywords[RUBY2_KEYWORDS] = list(kwargs)
        arguments.append(keywords)
    data = {
        "job_class": name,
        "job_id": str(uuid.uuid4()),
        "provider_job_id": None,
        "queue_name": queue,
        "priority": None,
        "arguments": arguments,
        "executions": 0,
        "exception_executions": {},
        "locale": locale,
        "timezone": "UTC",
        "enqueued_at": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
    }
    wrapped: Payload = {}
    for key, value in payload.items():
        if key == "kwargs":
            continue
        if key == "args":
            wrapped["args"] = [data]
        elif key == "class":
            wrapped["class"] = RAILS_WRAPPER
            wrapped["wrapped"] = name
        else:
            wrapped[key] = value
    return wrapped
