"""The registry of job classes a worker may run, by wire name.

A payload's ``class`` is looked up here and nowhere else: a payload never chooses what
Python code to import. Jobs register themselves when their class is created (``Job``
subclasses and ``@job`` functions), and the Django app imports each installed app's
``jobs`` module at start-up, so a worker knows every job its project defines.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # For types only, and the one cycle left in the engine on purpose: the registry holds
    # ``Job`` classes, and ``job`` imports the registry so each class registers itself when
    # it is defined. A protocol restating ``Job`` here would only make callers cast back.
    from django_wurk.core.job import Job


logger = logging.getLogger("django_wurk.registry")


class Registry:
    def __init__(self) -> None:
        self._jobs: dict[str, type[Job]] = {}
        self._duplicates: dict[str, list[str]] = {}
        #: The names registered when start-up discovery ended (``mark_discovered``).
        self._discovered: frozenset[str] | None = None
        self._lock = threading.Lock()

    def register(self, job_class: type[Job]) -> None:
        name = job_class.wire_name
        with self._lock:
            current = self._jobs.get(name)
            if current is not None and _path(current) != _path(job_class):
                # Not an exception: raising here would break the import of the whole jobs
                # module with a traceback. The first keeps the name; `manage.py check`
                # reports E002 and runwurk refuses to start until it is fixed.
                self._duplicates.setdefault(name, [_path(current)]).append(_path(job_class))
                logger.error(
                    "wire_name %r is used by both %s and %s; give one of them another wire_name",
                    name,
                    _path(current),
                    _path(job_class),
                )
                return
            # Re-registering the same dotted path (a module reloaded by autoreload) replaces it.
            self._jobs[name] = job_class

    def unregister(self, name: str) -> None:
        """Free ``name``; a clash recorded for it goes too, since no class holds it now."""
        with self._lock:
            self._jobs.pop(name, None)
            self._duplicates.pop(name, None)

    def resolve(self, name: str) -> type[Job] | None:
        return self._jobs.get(name)

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def mark_discovered(self) -> None:
        """Start-up discovery is over (every app's ``jobs`` module is imported): what is
        registered now, every worker process registers too."""
        with self._lock:
            self._discovered = frozenset(self._jobs)

    def undiscovered(self) -> list[str]:
        """The names registered since ``mark_discovered``: jobs whose module only something
        after start-up imported (a view), which a worker may never know. Empty before it."""
        with self._lock:
            discovered = self._discovered
            return [] if discovered is None else sorted(set(self._jobs) - discovered)

    def duplicates(self) -> dict[str, list[str]]:
        """Wire names claimed twice (kept for ``manage.py check``)."""
        return {k: list(v) for k, v in self._duplicates.items()}


def _path(job_class: type) -> str:
    return f"{job_class.__module__}.{job_class.__qualname__}"


registry = Registry()
