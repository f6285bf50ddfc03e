"""``core.feature.order``: a chain's order comes from the features' own places, never from
the order they were given in."""

from __future__ import annotations

import itertools
import random

import pytest

from django_wurk.core.feature import Feature, FeatureOrderError, Place, order


def feature(name: str, **place: object) -> Feature:
    return Feature(name, server_place=Place(**place))  # type: ignore[arg-type]


def names(features: list[Feature]) -> list[str]:
    return [f.name for f in features]


def test_places_decide_and_names_break_ties() -> None:
    given = [
        feature("encryption", edge="inner"),
        feature("unique"),
        feature("limiters", outside=("unique", "batches")),
        feature("batches", inside=("unique",)),
        feature("database", edge="outer"),
        feature("status"),
    ]
    # status is free of the others: among those free to come next, names decide.
    expected = ["database", "limiters", "status", "unique", "batches", "encryption"]
    for permutation in itertools.permutations(given):
        assert names(order(list(permutation), "server")) == expected


def test_a_place_naming_an_absent_feature_is_ignored_and_chains_are_separate() -> None:
    only_client = Feature("tracing", client_place=Place(outside=("encryption",), edge="inner"))
    given = [feature("limiters", outside=("unique",)), only_client]
    assert names(order(given, "server", lambda f: f.name != "tracing")) == ["limiters"]
    assert names(order(given, "client", lambda f: f.name == "tracing")) == ["tracing"]


def test_contradicting_places_name_the_features() -> None:
    given = [
        feature("a", outside=("b",)),
        feature("b", outside=("c",)),
        feature("c", outside=("a",)),
        feature("d"),
    ]
    with pytest.raises(FeatureOrderError, match="server middleware of a, b, c cannot be ordered"):
        order(given, "server")


def test_edges_against_places() -> None:
    """An edge is a place like any other: a feature stated to be outside an outer one is a contradiction."""
    with pytest.raises(FeatureOrderError):
        order([feature("db", edge="outer"), feature("x", outside=("db",))], "server")
    rng = random.Random(7)
    given = [feature(f"f{i}") for i in range(12)] + [feature("zz", edge="outer"), feature("aa", edge="inner")]
    for _ in range(50):
        rng.shuffle(given)
        found = names(order(given, "server"))
        assert found[0] == "zz" and found[-1] == "aa" and found[1:-1] == sorted(found[1:-1])


def test_a_name_is_a_word() -> None:
    with pytest.raises(ValueError, match="a feature's name is a word"):
        Feature("two words")
