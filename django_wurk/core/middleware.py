"""Client and server middleware chains.

A middleware is an object called with the job and a ``call_next`` function; it does its
work around ``call_next()``. Client middleware sees every push (including promotions from
the schedule and retry sets) and may drop it by returning ``None`` instead of what
``call_next()`` returned. Server middleware wraps every execution.

Chains hold instances, built from a class and its arguments when added, so ``remove`` and
``insert_before`` can name a middleware by its class, as in Sidekiq. The features' middleware
is placed by the engine (``Wurk.use``, ``compose``); an application's own, added with those
verbs, keeps its place next to the feature middleware it was put after.

A middleware that acts only on payloads carrying some option says so with a class
attribute ``payload_keys``, a tuple of key names: the chain then calls it only for a
payload holding at least one of them, and every other job skips it at the cost of a dict
lookup per key. The keys are looked for when the chain starts, in the payload as the
job was read, so a job pushed by any producer (Ruby included) that carries the option
still goes through it; a middleware that must see keys another one adds on the way in
does not declare ``payload_keys``.

Client middleware runs on every push, and the built-in ones act only on payloads with an
option (``encrypt``, ``expires_in``), yet each costs a call per push whether it acts or not:
in a bulk push that was as much as encoding the job. So a client middleware may say
``client_keys``: it does nothing but ``return call_next()`` unless one of these keys is in
the payload as it is called or in what ``call_next()`` returns. Unlike ``payload_keys`` the
keys could be added on the way, by another middleware, so they are trusted only in a chain
where every middleware says which keys it adds, with ``adds_keys`` (a frozenset: the keys
it may add to a payload or remove from it; it changes a payload only in place and returns
what ``call_next()`` returned, or ``None``). Then a middleware whose keys are absent, and
that no other one can add, is skipped exactly when it would have done nothing. Any other
middleware in the chain (an application's own, say) turns the skipping off. A middleware
whose work also depends on the context of the push (the batch middleware: inside a batch's
``jobs()`` block) names that with ``client_active``, a call without arguments (C-level,
ideally: it is made on every push) whose true answer means "call me whatever the keys";
declaring ``adds_keys`` promises too that a middleware changes no such context for the
middleware it calls.
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

    #: No middleware at all: read on every push, so an attribute kept by the edits rather
    #: than ``len()``, whose ``__len__`` is a Python call.
    empty = True

    def __init__(self) -> None:
        #: (class, instance, owner): owner is the feature whose middleware it is, or None.
        self._entries: list[tuple[type, Any, str | None]] = []
        #: ``_entries`` from the innermost out, each with its ``payload_keys`` (None: always
        #: called), built again on the first ``invoke`` after an edit.
        self._plan: list[tuple[Any, tuple[str, ...] | None, Callable[[], Any] | None]] | None = None
        #: From the same build: the middleware always called (innermost first), every key
        #: some middleware waits for, and whether any middleware names a ``client_active``.
        #: Most payloads hold none of those keys, and one ``isdisjoint`` then stands for the
        #: per-middleware lookups.
        self._always: list[Any] = []
        self._wanted: frozenset[str] = frozenset()
        self._contextual = False

    def __iter__(self) -> Any:
        return iter([instance for _, instance, _ in self._entries])

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, cls: type) -> bool:
        return any(c is cls for c, _, _ in self._entries)

    def owners(self) -> list[str | None]:
        """Whose each middleware is, outermost first: a feature's name, or None (an application's)."""
        return [owner for _, _, owner in self._entries]

    def add(self, cls: type, *args: Any, **kwargs: Any) -> None:
        """Append ``cls(*args, **kwargs)``; adding a class twice replaces the first."""
        self.remove(cls)
        self._entries.append((cls, cls(*args, **kwargs), None))
        self._changed()

    def prepend(self, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(0, (cls, cls(*args, **kwargs), None))
        self._changed()

    def insert_before(self, old: type, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(self._index(old), (cls, cls(*args, **kwargs), None))
        self._changed()

    def insert_after(self, old: type, cls: type, *args: Any, **kwargs: Any) -> None:
        self.remove(cls)
        self._entries.insert(self._index(old) + 1, (cls, cls(*args, **kwargs), None))
        self._changed()

    def remove(self, cls: type) -> None:
        self._entries = [(c, i, o) for c, i, o in self._entries if c is not cls]
        self._changed()

    def compose(self, features: list[tuple[str, Any]]) -> None:
        """The features' middleware becomes ``features`` (owner, instance), outermost first.

        An application's own middleware stays right after the feature middleware it
        followed (at the start if it came first, at the end if that feature is gone), so
        adding a feature later never moves it to the other side of the ones it was put beside.
        """
        anchored: dict[str | None, list[tuple[type, Any, str | None]]] = {}
        anchor: str | None = None
        for entry in self._entries:
            if entry[2] is None:
                anchored.setdefault(anchor, []).append(entry)
            else:
                anchor = entry[2]
        entries = anchored.pop(None, [])
        for owner, instance in features:
            entries.append((type(instance), instance, owner))
            entries += anchored.pop(owner, [])
        for rest in anchored.values():
            entries += rest
        self._entries = entries
        self._changed()

    def _changed(self) -> None:
        self._plan = None
        self.empty = not self._entries

    def clear(self) -> None:
        self._entries = []
        self._changed()

    @contextmanager
    def preserved(self) -> Iterator[Chain]:
        """Undo, at the end of the block, every edit made to the chain inside it (for tests)."""
        saved = list(self._entries)
        try:
            yield self
        finally:
            self._entries = saved
            self._plan = None
        self.empty = not self._entries

    def _index(self, cls: type) -> int:
        for i, (c, _, _) in enumerate(self._entries):
            if c is cls:
                return i
        raise ValueError(f"{cls.__qualname__} is not in this middleware chain")

    def _build_plan(self) -> list[tuple[Any, tuple[str, ...] | None, Callable[[], Any] | None]]:
        instances = [instance for _, instance, _ in reversed(self._entries)]
        adds: list[frozenset[str] | None] = [getattr(i, "adds_keys", None) for i in instances]
        declared = all(a is not None for a in adds)
        plan: list[tuple[Any, tuple[str, ...] | None, Callable[[], Any] | None]] = []
        for index, instance in enumerate(instances):
            wanted = getattr(instance, "payload_keys", None)
            keys = getattr(instance, "client_keys", None)
            active = None
            if wanted is None and keys is not None and declared:
                others = frozenset().union(*(a for i, a in enumerate(adds) if i != index and a is not None))
                if not others.intersection(keys):
                    wanted = tuple(keys)
                    active = getattr(instance, "client_active", None)
            plan.append((instance, wanted, active))
        self._always = [instance for instance, wanted, _ in plan if wanted is None]
        self._wanted = frozenset(key for _, wanted, _ in plan for key in wanted or ())
        self._contextual = any(active is not None for _, _, active in plan)
        self._plan = plan
        return plan

    def invoke(self, innermost: Callable[[], Any], *args: Any) -> Any:
        """Call each middleware as ``mw(*args, call_next)`` around ``innermost()``.

        ``args[1]`` is the payload in both chains. Runs for every job, so the wrapping is
        built from the inside out, and a middleware whose ``payload_keys`` the payload does
        not hold (or, in a client chain, whose ``client_keys``, see the module's docstring)
        is left out without a call.
        """
        plan = self._plan
        if plan is None:
            plan = self._build_plan()
        payload = args[1] if len(args) > 1 and isinstance(args[1], dict) else None
        call = innermost
        if payload is not None and not self._contextual and self._wanted.isdisjoint(payload):
            for instance in self._always:
                call = functools.partial(instance, *args, call)
            return call()
        for instance, wanted, active in plan:
            if wanted is not None and payload is not None and (active is None or not active()):
                for key in wanted:
                    if key in payload:
                        break
                else:
                    continue
            call = functools.partial(instance, *args, call)
        return call()
