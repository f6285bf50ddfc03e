"""A feature is a value: what it plugs into the engine, and where its middleware sits.

Batches, unique jobs, limiters, encryption and the rest each export one ``Feature``; the
engine is built from a sequence of them (``Wurk(features=...)``, ``wurk.use(...)``) and
nothing is installed by importing a module. A feature may give:

* client and server middleware, each with a ``Place``;
* a push gate, run where new jobs are really written (``core/client.py``);
* error, retry and death handlers;
* listeners to the process's lifecycle events (``core/events.py``);
* the job options and delivery options it reads, each with its check (and a check of
  them together).

What it plugs in is made by its ``build(wurk)``, once per engine, as one ``Plug``.

**Order.** Where a middleware sits decides what it sees: a rate-limited job must look like
a failure to the unique lock inside the limiter, or the lock is released; encryption must
be innermost on the server, so every other middleware and handler sees the sealed
argument. Each feature says so itself, by name (``Place(outside=("unique",))``), and the
engine sorts the chain from those statements, the features' names breaking ties, so the
chains do not depend on the order the features were given in. A place may also pin a
middleware to an edge (``edge="outer"``: around every other feature's, as Django's
connection handling is; ``"inner"``: next to the job). Places that name a feature not in
the set are ignored; places that contradict each other raise ``FeatureOrderError``.
Dramatiq keeps its middleware order in one list and Sidekiq has ``chain.insert_before``;
this keeps the list (``core/features/DEFAULT``, outermost first, checked against the sort)
and the reasons, each beside the feature it concerns.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: ``check(value, where)`` of an option: returns the value normalised, or raises
#: ``ValueError`` naming ``where`` (the job or the ``set(...)`` call) and what is wrong.
OptionCheck = Callable[[Any, str], Any]
#: ``check(options, where)`` of a feature's options together (after each was checked alone):
#: raises ``ValueError`` naming ``where`` and the options that cannot be used together.
OptionsCheck = Callable[[Mapping[str, Any], str], None]


class FeatureOrderError(ValueError):
    """The places the features state cannot all hold (a cycle), or two features share a name."""


@dataclass(frozen=True)
class Place:
    """Where a feature's middleware sits in one chain, relative to other features'.

    ``outside``: features whose middleware this one wraps (it runs first on the way in and
    sees their outcome on the way out). ``inside``: features whose middleware wraps this one.
    ``edge``: ``"outer"`` sorts it before every feature without an outer edge, ``"inner"``
    after every feature without an inner edge.
    """

    outside: tuple[str, ...] = ()
    inside: tuple[str, ...] = ()
    edge: Literal["outer", "inner"] | None = None


ANYWHERE = Place()


@dataclass
class Plug:
    """What one feature plugs into one engine, made by its ``Feature.build``.

    One object per feature and engine, so the parts can share state (the timeouts'
    middleware enters jobs in the deadline table its watchdog reads).
    """

    #: Client middleware: sees every push (promotions too), may change or drop it.
    client: Any = None
    #: Server middleware: wraps every execution.
    server: Any = None
    #: Runs where new jobs are really written, and may drop some (``writer.PushGate``).
    gate: Any = None
    #: ``handler(exc, context)`` for every failure and internal error.
    on_error: Callable[[BaseException, dict[str, Any]], None] | None = None
    #: ``handler(payload, exc)`` when a failed job is written to the retry set.
    on_retry: Callable[[Any, BaseException], None] | None = None
    #: ``handler(payload, exc)`` when a job dies or is discarded.
    on_death: Callable[[Any, BaseException], None] | None = None
    #: Lifecycle listeners by event name (``core/events.py``), each called with the ``Process``.
    events: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)


def nothing(wurk: Wurk) -> Plug:
    return Plug()


@dataclass(frozen=True, eq=False)
class Feature:
    """One feature: its name, what it plugs in, where its middleware sits, the options it reads."""

    name: str
    #: ``build(wurk)``: what it plugs into the engine ``wurk`` (called once per engine).
    build: Callable[[Wurk], Plug] = nothing
    client_place: Place = ANYWHERE
    #: Where its server middleware sits. Also the order of the features' gates (outermost
    #: first, as a push goes in) and, the other way round, of their error, retry and death
    #: handlers (innermost first, as the middleware see an outcome on its way out).
    server_place: Place = ANYWHERE
    #: ``@job(...)``/``set(...)`` keys this feature reads (stored in the payload), each with its check.
    job_options: Mapping[str, OptionCheck] = field(default_factory=dict)
    #: Per-push options that say how to deliver a job, never stored in it.
    delivery_options: Mapping[str, OptionCheck] = field(default_factory=dict)
    #: Checks a job's options together, when its class is defined and at ``set(...)``: the
    #: combinations that cannot work (debounce with throttle) fail there, not at a push.
    check_options: OptionsCheck | None = None
    #: The class of its own settings (a frozen dataclass; each field is a ``WURK`` key in lower
    #: case), read with the engine's by ``Config.from_mapping`` and through ``config.section``.
    settings: type[Any] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"a feature's name is a word (letters, digits, '_', '-', '.'): {self.name!r}")


def unique_by_name(features: Iterable[Feature]) -> list[Feature]:
    """``features`` as a list; a name given twice must be the same feature (kept once)."""
    seen: dict[str, Feature] = {}
    for feature in features:
        known = seen.get(feature.name)
        if known is None:
            seen[feature.name] = feature
        elif known is not feature:
            raise FeatureOrderError(f"two different features are named {feature.name!r}")
    return list(seen.values())


def order(
    features: Sequence[Feature],
    chain: Literal["client", "server"],
    present: Callable[[Feature], bool] = lambda feature: True,
) -> list[Feature]:
    """The ``present`` features, outermost first, by their places in ``chain``.

    A topological sort: a feature comes before every one it is ``outside`` of and after
    every one it is ``inside`` of, an ``outer`` edge before everything else and an ``inner``
    one after; among the features free to come next, the one whose name sorts first. So the
    answer depends on the features, never on the order of ``features``.
    """
    chosen = [f for f in features if present(f)]
    names = {f.name for f in chosen}
    place: dict[str, Place] = {f.name: getattr(f, f"{chain}_place") for f in chosen}
    after: dict[str, set[str]] = {name: set() for name in names}  # name -> those that must precede it

    def precede(first: str, then: str) -> None:
        if first in names and then in names and first != then:
            after[then].add(first)

    for name, where in place.items():
        for other in where.outside:
            precede(name, other)
        for other in where.inside:
            precede(other, name)
    for name, where in place.items():
        for other, there in place.items():
            if where.edge == "outer" and there.edge != "outer":
                precede(name, other)
            if where.edge == "inner" and there.edge != "inner":
                precede(other, name)

    waiting = {name: len(before) for name, before in after.items()}
    followers: dict[str, list[str]] = {name: [] for name in names}
    for name, before in after.items():
        for first in before:
            followers[first].append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    ordered: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        ordered.append(name)
        for follower in followers[name]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                heapq.heappush(ready, follower)
    if len(ordered) < len(names):
        stuck = sorted(name for name, count in waiting.items() if count)
        raise FeatureOrderError(
            f"the {chain} middleware of {', '.join(stuck)} cannot be ordered: their places "
            "contradict each other (each must be outside and inside another)"
        )
    by_name = {f.name: f for f in chosen}
    return [by_name[name] for name in ordered]
