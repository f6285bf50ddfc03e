"""The default engine's composition: the same chains and hooks from every order of
``DEFAULT``, and ``DEFAULT`` listed in the order the features' places give."""

from __future__ import annotations

import itertools
import random

from django_wurk import Wurk
from django_wurk.core.feature import order
from django_wurk.core.features import DEFAULT


def shape(engine: Wurk) -> tuple[object, ...]:
    """What an engine is made of, by feature: chains, gates, handlers, listeners."""

    def owner(hook: object) -> str:
        return (
            type(hook).__module__.split(".")[3]
            if type(hook).__module__.startswith("django_wurk.core.features")
            else type(hook).__qualname__
        )

    return (
        engine.client_middleware.owners(),
        engine.server_middleware.owners(),
        [owner(g) for g in engine.push_gates],
        [owner(h) for h in engine.error_handlers],
        [owner(h) for h in engine.retry_handlers],
        [owner(h) for h in engine.death_handlers],
        {event: len(engine.events.listeners(event)) for event in ("startup", "shutdown", "leader")},
        sorted(engine.job_options),
    )


def test_every_order_of_default_builds_the_same_engine() -> None:
    expected = shape(Wurk(features=DEFAULT))
    assert expected[1] == [
        "limiters",
        "batches",
        "unique",
        "expiring",
        "status",
        "cancel",
        "timeouts",
        "encryption",
    ]
    assert expected[0] == ["encryption", "expiring", "batches"]
    # A push the lock refuses is never collapsed, and one collapsed away is never "enqueued".
    assert expected[2] == ["unique", "collapse", "status"]
    permutations = list(itertools.permutations(DEFAULT))
    for given in [*random.Random(22).sample(permutations, 400), tuple(reversed(DEFAULT))]:
        assert shape(Wurk(features=given)) == expected, [f.name for f in given]
    # One at a time, in any order, the same too.
    engine = Wurk()
    for feature in random.Random(7).sample(DEFAULT, len(DEFAULT)):
        engine.use(feature)
    assert shape(engine) == expected


def test_default_is_listed_in_the_order_its_places_give() -> None:
    assert [f.name for f in order(list(DEFAULT), "server")] == [f.name for f in DEFAULT]


def test_importing_a_feature_installs_nothing() -> None:
    engine = Wurk()
    from django_wurk.core.features import batches, unique  # noqa: F401 (imported already: no effect either way)

    assert engine.client_middleware.owners() == [] and engine.server_middleware.owners() == []
    assert engine.push_gates == [] and engine.error_handlers == [] and engine.job_options == {}
