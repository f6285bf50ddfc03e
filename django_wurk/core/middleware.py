"""Client and server middleware chains.

A middleware is an object called with the job and a ``call_next`` function; it does its
work around ``call_next()``. Client middleware sees every push (including promotions from
the schedule and retry sets) and may drop it by returning ``None`` instead of what
``call_next()`` returned. Server middleware wraps every execution.

Chains hold instances, built from a class and its arguments when added, so ``remove`` and
``insert_before`` can name a middleware by its class, as in Sidekiq.

A middleware that acts only on payloads carrying some option says so with a class
attribute ``payload_keys``, a tuple of key names: the chain then calls it only for a
payload holding at least one of them, and every other job skips it at the cost of a dict
lookup per key. The keys are looked for when the chain starts, in the payload as the
job was read, so a job pushed by any producer (Ruby included) that carries the option
still goes through it; a middleware that must see keys another one adds on the way in
does not declare ``payload_keys``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    # For types only, a cycle left on purpose: server middleware is handed the ``Job``
    # instance, and ``job`` sits above the engine that runs the chains. Naming the real
    # class tells a middleware author what they get; nothing here runs any of its code.
    from django_wurk.core.job import Job


class ClientMiddleware(Protocol):
    def __call__(
        self, job_class: str, payload: Payload, queue: str, call_next: Callable[[], Payload | None]
    ) -> Payload | None: ...


class ServerMiddleware(Protocol):
    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None: ...


class Chain:
    """An ordered list of middleware instances with Sidekiq's editing verbs."""

    def __init__(self) -> None:
        self._entries: list[tuple[type, Any]] = []
        #: ``_entries`` from the innermost out, each with its ``payload_keys`` (None: always
        #: called), built again on the first ``invoke`` after an edit.
        self._plan: list[tuple[Any, tuple[str, ...] | None]] | None = None
        #: From the same build: the middleware always called (innermost first), and every
        #: key some middleware waits for. Most payloads hold none of those keys, and one
        #: ``isdisjoint`` then stands for the per-middleware lookups.
        self._always: list[Any] = []
        self._wanted: frozenset[str] = frozenset()

    def __iter__(self) -> Any:
        return iter([instance for _, instance in self._entries])

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, cls: type) -> bool:
        return any(c is cls for c, _ in self._entries)

    def add(self, cls: type, *args: Any, **kwargs: Any) -> None:
        """Append ``cls(*args, **kwargs)``; adding a class twice replaces the first."""
        self.remove(cls)
        self._entries.append((cls, cls(*args, **kwargs)))
        self._plan = None

    def prepend(self, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(0, (cls, cls(*args, **kwargs)))
        self._plan = None

    def insert_before(self, old: type, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(self._index(old), (cls, cls(*args, **kwargs)))
        self._plan = None

    def insert_after(self, old: type, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(self._index(old) + 1, (cls, cls(*args, **kwargs)))
        self._plan = None

    def remove(self, cls: type) -> None:
        self._entries = [(c, i) for c, i in self._entries if c is not cls]
        self._plan = None

    def clear(self) -> None:
        self._entries = []
        self._plan = None

    @contextmanager
    def preserved(self) -> Iterator[Chain]:
        """Undo, at the end of the block, every edit made to the chain inside it (for tests)."""
        saved = list(self._entries)
        try:
            yield self
        finally:
            self._entries = saved
            self._plan = None

    def _index(self, cls: type) -> int:
        for i, (c, _) in enumerate(self._entries):
            if c is cls:
                return i
        raise ValueError(f"{cls.__qualname__} is not in this middleware chain")

    def invoke(self, innermost: Callable[[], Any], *args: Any) -> Any:
        """Call each middleware as ``mw(*args, call_next)`` around ``innermost()``.

        ``args[1]`` is the payload in both chains. Runs for every job, so the wrapping is
        built from the inside out, and a middleware whose ``payload_keys`` the payload does
        not hold is left out without a call.
        """
        plan = self._plan
        if plan is None:
            plan = self._build()
        payload = args[1] if len(args) > 1 and isinstance(args[1], dict) else None
        call = innermost
        if payload is not None and self._wanted.isdisjoint(payload):
            for instance in self._always:
                call = functools.partial(instance, *args, call)
            return call()
        for instance, wanted in plan:
            if wanted is not None and payload is not None:
                for key in wanted:
                    if key in payload:
                        break
                else:
                    continue
            call = functools.partial(instance, *args, call)
        return call()

    def _build(self) -> list[tuple[Any, tuple[str, ...] | None]]:
        entries = reversed(self._entries)
        plan = [(instance, getattr(instance, "payload_keys", None)) for _, instance in entries]
        self._always = [instance for instance, wanted in plan if wanted is None]
        self._wanted = frozenset(key for _, wanted in plan for key in wanted or ())
        self._plan = plan
        return plan
