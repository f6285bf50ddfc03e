"""Delivery options: ``set(using=..., on_commit=...)`` say how to deliver one push, not what
the job is.

The Django app declares them (``django_wurk.delivery``) and checks their values, so a bad
one still fails at ``set(...)``; the engine carries them to the pusher without reading them
and never writes them into the payload.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from django_wurk import Job, Wurk, job, wurk
from django_wurk.core.client import NO_DELIVERY, Delivery
from django_wurk.core.feature import Feature, FeatureOrderError
from django_wurk.core.job import delivery_options
from django_wurk.core.wire import Payload
from tests.jobsapp import jobs


class RecordingPusher:
    """Keeps what it is handed, delivery included (``testing.fake()`` drops the delivery)."""

    def __init__(self) -> None:
        self.pushes: list[tuple[list[Payload], float | None, dict[str, Any]]] = []

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        self.pushes.append((list(payloads), at, dict(delivery)))


@pytest.fixture
def pushes(wurk: Wurk) -> Iterator[RecordingPusher]:
    recorder = RecordingPusher()
    previous, wurk.pusher = wurk.pusher, recorder
    try:
        yield recorder
    finally:
        wurk.pusher = previous


def lonely(x: int) -> None:
    """A module-level function for ``@job`` to wrap (it is never registered: its options fail)."""


def test_the_app_declares_using_and_on_commit() -> None:
    # ``shard`` is the engine's own: its pushers read it (docs/scaling.md).
    options = delivery_options()
    assert set(options) == {"using", "on_commit", "shard"}
    assert {k: check.__module__ for k, check in options.items()} == {
        "using": "django_wurk.delivery",
        "on_commit": "django_wurk.delivery",
        "shard": "django_wurk.core.job",
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"using": 5}, "using must be a database alias, got 5"),
        ({"using": ["default"]}, "using must be a database alias, got ['default']"),
        ({"on_commit": "no"}, "on_commit must be True or False, got 'no'"),
        ({"on_commit": None}, "on_commit must be True or False, got None"),
        ({"on_commit": 0}, "on_commit must be True or False, got 0"),
    ],
)
def test_a_bad_delivery_option_fails_at_set(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        jobs.echo.set(**options)
    assert str(err.value) == f"{jobs.echo.wire_name}.set(): {message}"
    with pytest.raises(ValueError, match="must be"):
        jobs.PlainJob.set(queue="low").set(**options)  # a chained set checks them too


def test_a_bad_delivery_option_fails_where_the_job_is_defined() -> None:
    with pytest.raises(ValueError, match="on_commit must be True or False, got 'later'"):

        class Hasty(Job, abstract=True):
            options = {"on_commit": "later"}

    with pytest.raises(ValueError, match="using must be a database alias, got 3"):
        job(using=3)(lonely)


def test_delivery_options_reach_the_pusher_and_never_the_payload(pushes: RecordingPusher) -> None:
    jobs.echo.set(using="other", on_commit=False, locale="fr").perform_async(1)
    jobs.echo.set(on_commit=False).perform_bulk([(2,), (3,)])
    jobs.echo.set(using=None).perform_in(3600, 4)
    jobs.echo.perform_async(5)
    deliveries = [delivery for _, _, delivery in pushes.pushes]
    assert deliveries == [{"using": "other", "on_commit": False}, {"on_commit": False}, {"using": None}, {}]
    for payloads, _, _ in pushes.pushes:
        for payload in payloads:
            assert "using" not in payload and "on_commit" not in payload
    assert pushes.pushes[0][0][0]["locale"] == "fr"  # an ordinary option stays in the payload


def test_class_defaults_are_delivered_too(pushes: RecordingPusher) -> None:
    class AfterAnyCommit(Job, abstract=True):
        options = {"on_commit": False}

    from django_wurk.core.job import Setter

    Setter(AfterAnyCommit).perform_async()
    [(payloads, _, delivery)] = pushes.pushes
    assert delivery == {"on_commit": False} and "on_commit" not in payloads[0]


def test_the_engine_carries_any_declared_option_without_reading_it(pushes: RecordingPusher) -> None:
    checked: list[tuple[Any, str]] = []

    def check_region(value: Any, where: str) -> str:
        checked.append((value, where))
        if value not in ("eu", "us"):
            raise ValueError(f"{where}: region must be 'eu' or 'us', got {value!r}")
        return str(value).upper()

    wurk.use(Feature("regions", delivery_options={"region": check_region}))
    try:
        jobs.echo.set(region="eu").perform_async(1)
        with pytest.raises(ValueError, match="region must be"):
            jobs.echo.set(region="mars")
    finally:
        wurk.drop("regions")
    [(payloads, _, delivery)] = pushes.pushes
    assert delivery == {"region": "EU"} and "region" not in payloads[0]
    assert checked[0] == ("eu", f"{jobs.echo.wire_name}.set()")
    # Undeclared, it is an ordinary option again: carried in the payload, as Sidekiq does.
    jobs.echo.set(region="eu").perform_async(2)
    assert pushes.pushes[1][0][0]["region"] == "eu" and pushes.pushes[1][2] == {}


@pytest.mark.parametrize("name", ["queue", "retry", "tags", "jid", "class", "args", "shard"])
def test_a_job_option_or_payload_key_cannot_become_a_delivery_option(name: str) -> None:
    with pytest.raises(FeatureOrderError, match="is a job option or a payload key"):
        wurk.use(Feature("taker", delivery_options={name: lambda value, where: value}))
    assert wurk.feature("taker") is None and name not in wurk.delivery_options
