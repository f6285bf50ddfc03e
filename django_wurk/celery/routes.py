"""Celery's ``task_routes`` (``CELERY_TASK_ROUTES``): which queue a task goes to by its name.

The forms Celery reads, in its order of precedence: a call's ``queue=``, then the task's own
``queue``, then the first route that answers, then ``task_default_queue``. A route is

* a dict ``{name or pattern: {"queue": "q"} or "q"}``: exact names first, then glob patterns
  (``"feeds.tasks.*"``) and compiled regular expressions, in the dict's order;
* a callable ``router(name, args, kwargs, options, task=None, **kw)`` returning such a dict,
  a queue name, or None to pass;
* ``"module.attribute"`` text naming such a callable;
* a list or tuple of those, tried in order.

Only the queue is carried: a route that also sets ``exchange``, ``routing_key`` or another
AMQP option is refused when a task is sent with it, naming the option, since nothing here
could honour it. A route's ``priority`` is passed on to the call as Celery would.
"""

from __future__ import annotations

import fnmatch
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_wurk.celery.exceptions import ImproperlyConfigured

#: What a route may set, besides ``queue``: passed to the call as its options.
PASSED_ON = ("priority",)


def _compile(pattern: Any) -> re.Pattern[str] | None:
    if isinstance(pattern, re.Pattern):
        return pattern
    if isinstance(pattern, str) and any(c in pattern for c in "*?["):
        return re.compile(fnmatch.translate(pattern))
    return None


class MapRoute:
    """A dict route: exact names, then patterns in order."""

    def __init__(self, mapping: Mapping[Any, Any]) -> None:
        self.exact: dict[str, Any] = {}
        self.patterns: list[tuple[re.Pattern[str], Any]] = []
        for key, value in mapping.items():
            compiled = _compile(key)
            if compiled is not None:
                self.patterns.append((compiled, value))
            elif isinstance(key, str):
                self.exact[key] = value
            else:
                raise ImproperlyConfigured(f"task_routes: a key must be a task name or pattern, got {key!r}")

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name in self.exact:
            return self.exact[name]
        for pattern, value in self.patterns:
            if pattern.match(name):
                return value
        return None


def routers(setting: Any) -> list[Callable[..., Any]]:
    """The routers a ``task_routes`` value describes, in order."""
    if not setting:
        return []
    items: Sequence[Any] = setting if isinstance(setting, (list, tuple)) else [setting]
    out: list[Callable[..., Any]] = []
    for item in items:
        if isinstance(item, Mapping):
            out.append(MapRoute(item))
        elif isinstance(item, str):
            module, _, attr = item.rpartition(".")
            try:
                found = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError, ValueError) as exc:
                raise ImproperlyConfigured(f"task_routes: cannot import router {item!r}: {exc}") from None
            out.append(found)
        elif callable(item):
            out.append(item)
        else:
            raise ImproperlyConfigured(
                f"task_routes: a route is a dict, a callable or its dotted path, got {item!r}"
            )
    return out


#: The routers of the last ``task_routes`` value seen, by identity: built once, as Celery's
#: router is, not at every push (a value replaced in the settings is read afresh).
_built: tuple[Any, list[Callable[..., Any]]] = (None, [])


def _routers(setting: Any) -> list[Callable[..., Any]]:
    global _built
    seen, built = _built
    if seen is not setting:
        built = routers(setting)
        _built = (setting, built)
    return built


def route(
    setting: Any, name: str, args: Any, kwargs: Any, options: Mapping[str, Any], task: Any = None
) -> dict[str, Any] | None:
    """The first answer of ``setting``'s routers for ``name``, as ``{"queue": ..., ...}``; None if none."""
    if not setting:
        return None
    for router in _routers(setting):
        if isinstance(router, MapRoute):
            answer = router(name)
        else:
            answer = router(name, args, kwargs, dict(options), task=task)
        if answer is None:
            continue
        return _destination(answer, name)
    return None


def _destination(answer: Any, name: str) -> dict[str, Any]:
    if isinstance(answer, str):
        return {"queue": answer}
    if not isinstance(answer, Mapping):
        raise ImproperlyConfigured(
            f"task_routes: the route of {name} must be a dict or a queue name, got {answer!r}"
        )
    unknown = sorted(k for k in answer if k != "queue" and k not in PASSED_ON)
    if unknown:
        raise ImproperlyConfigured(
            f"task_routes: the route of {name} sets {', '.join(unknown)}: only queue (and priority) "
            "can be carried, there is no AMQP exchange or routing key here"
        )
    return dict(answer)
