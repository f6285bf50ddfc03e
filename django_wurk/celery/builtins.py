"""The tasks Celery itself defines that its canvas sends: ``celery.map`` and ``celery.starmap``.

``task.map(it)``, ``task.starmap(it)`` and each part of ``task.chunks(it, n)`` are one job of
these, which calls the named task's function on every item in the worker, in order, and
returns the list of results, as Celery's do. The named task must be defined in the worker:
a signature never chooses what to import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_wurk.celery.exceptions import NotRegistered
from django_wurk.celery.task import Task, lookup, shared_task


def _target(task: Any) -> Task:
    name = task.get("task") if isinstance(task, Mapping) else None
    found = lookup(name) if isinstance(name, str) else None
    if found is None:
        raise NotRegistered(f"map/starmap: no task named {name!r} is defined in this worker")
    return found


def _items(it: Any) -> list[Any]:
    if not isinstance(it, list):
        raise TypeError(f"map/starmap: the items must be a list, got {type(it).__name__}")
    return it


def _map(task: Any, it: Any) -> list[Any]:
    target = _target(task)
    return [target(item) for item in _items(it)]


def _starmap(task: Any, it: Any) -> list[Any]:
    target = _target(task)
    out = []
    for item in _items(it):
        if not isinstance(item, list):
            raise TypeError(f"starmap: each item must be a list of arguments, got {item!r:.100}")
        out.append(target(*item))
    return out


xmap: Task = shared_task(name="celery.map")(_map)
xstarmap: Task = shared_task(name="celery.starmap")(_starmap)
