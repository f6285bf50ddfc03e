"""Keyword arguments and the call check (``core/arguments.py``, ``core/job.py``).

``send_welcome.perform_async(user_id=1)`` works like a positional call: the keyword
arguments travel under the payload's ``kwargs`` key and reach the function as keywords on a
worker, through retries and the schedule; a call the job could not take fails at enqueue,
naming the job and the argument, with nothing pushed.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Job, Wurk, job
from django_wurk.core import activejob
from django_wurk.core.features.unique.lock import lock_owner
from django_wurk.core.registry import registry
from django_wurk.core.worker.launcher import Launcher
from tests.conftest import queue_entries, wait_for

_lock = threading.Lock()
calls: list[tuple[str, list[Any], dict[str, Any]]] = []


def record(name: str, *args: Any, **kwargs: Any) -> None:
    with _lock:
        calls.append((name, list(args), kwargs))


@job(wire_name="kw.Welcome")
def send_welcome(user_id: int, *, template: str = "welcome", cc: list[str] | None = None) -> None:
    record("welcome", user_id, template=template, cc=cc)


@job(wire_name="kw.Flaky", retry=3)
def flaky(order: int, *, attempt_limit: int) -> None:
    record("flaky", order, attempt_limit=attempt_limit)
    raise RuntimeError("flaky fails")


@job(wire_name="kw.Interval")
def takes_interval(interval: int, when: str) -> None:
    record("interval", interval, when=when)


class Invoice(Job):
    wire_name = "kw.Invoice"

    def perform(self, invoice_id: int, *, reminder: bool = False) -> None:
        record("invoice", invoice_id, reminder=reminder)


class RubyOnly(Job):
    """No ``perform`` here: a Ruby worker runs it, so any call is accepted."""

    wire_name = "kw.RubyOnly"


@job(wire_name="kw.Unique", unique_for=600)
def unique_welcome(user_id: int, *, template: str = "welcome") -> None: ...


@job(wire_name="KwMailerJob", activejob=True)
def mailer(user_id: int, *, subject: str) -> None:
    record("mailer", user_id, subject=subject)


@pytest.fixture(autouse=True)
def fresh() -> None:
    calls.clear()


def test_keyword_arguments_travel_under_kwargs_and_reach_the_function(wurk: Wurk, r: Any) -> None:
    send_welcome.perform_async(user_id=7, template="promo")
    send_welcome.perform_async(8)
    [first, second] = reversed(queue_entries(r))
    assert (first["args"], first["kwargs"]) == ([], {"user_id": 7, "template": "promo"})
    # A positional call writes no kwargs key: the payload is byte for byte what it was.
    assert second["args"] == [8] and "kwargs" not in second
    # Sidekiq's keys first and in its order; ours after them.
    assert list(first)[:4] == ["retry", "queue", "args", "class"] and list(first)[4] == "kwargs"
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: len(calls) == 2)
    finally:
        worker.stop()
    assert sorted(calls, key=lambda c: c[1]) == [
        ("welcome", [7], {"template": "promo", "cc": None}),
        ("welcome", [8], {"template": "welcome", "cc": None}),
    ]


def test_every_verb_takes_keywords(wurk: Wurk, r: Any) -> None:
    send_welcome.perform_in(timedelta(minutes=5), 1, template="later")
    send_welcome.perform_at(datetime.now(UTC) + timedelta(hours=1), user_id=2)
    send_welcome.set(queue="mailers").perform_async(user_id=3, cc=["a@example.com"])
    Invoice.perform_async(4, reminder=True)
    Invoice.set(queue="mailers").perform_in(60, invoice_id=5)
    # In due order: in a minute, in five, in an hour.
    scheduled = [json.loads(m) for m in r.zrange("schedule", 0, -1)]
    assert [(p["class"], p["args"], p["kwargs"]) for p in scheduled] == [
        ("kw.Invoice", [], {"invoice_id": 5}),
        ("kw.Welcome", [1], {"template": "later"}),
        ("kw.Welcome", [], {"user_id": 2}),
    ]
    [mail] = queue_entries(r, "mailers")
    assert mail["kwargs"] == {"user_id": 3, "cc": ["a@example.com"]}
    [invoice] = queue_entries(r)
    assert (invoice["args"], invoice["kwargs"]) == ([4], {"reminder": True})
    assert Invoice.perform_inline(invoice_id=9, reminder=True) is None
    assert send_welcome.perform_inline(user_id=10) is None
    assert calls == [
        ("invoice", [9], {"reminder": True}),
        ("welcome", [10], {"template": "welcome", "cc": None}),
    ]


def test_interval_and_when_are_the_verbs_own_and_a_job_may_use_those_names(wurk: Wurk, r: Any) -> None:
    takes_interval.perform_in(0, interval=3, when="now")
    takes_interval.perform_at(0, 4, when="then")
    assert [(p["args"], p["kwargs"]) for p in reversed(queue_entries(r))] == [
        ([], {"interval": 3, "when": "now"}),
        ([4], {"when": "then"}),
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: send_welcome.perform_async(), r"kw\.Welcome: missing a required argument: 'user_id'"),
        (lambda: send_welcome.perform_async(1, 2), r"kw\.Welcome: too many positional arguments"),
        (
            lambda: send_welcome.perform_async(1, nope=2),
            r"kw\.Welcome: got an unexpected keyword argument 'nope'",
        ),
        (
            lambda: send_welcome.perform_async(1, user_id=1),
            r"kw\.Welcome: multiple values for argument 'user_id'",
        ),
        (
            lambda: send_welcome.perform_async("1", template="x", cc=[{1, 2}]),
            r"kw\.Welcome: argument 'cc'\[0\] is a builtins\.set",
        ),
        (
            lambda: send_welcome.perform_async(datetime.now(UTC)),
            r"kw\.Welcome: argument 'user_id' \(args\[0\]\) is a datetime\.datetime",
        ),
        (
            lambda: send_welcome.perform_in(60, user_id=float("nan")),
            r"kw\.Welcome: argument 'user_id' is nan",
        ),
        (
            lambda: send_welcome.set(queue="x").perform_async(),
            r"kw\.Welcome: missing a required argument: 'user_id'",
        ),
        (
            lambda: flaky.perform_async(1),
            r"kw\.Flaky: missing a required (keyword-only )?argument: 'attempt_limit'",
        ),
        (
            lambda: Invoice.perform_async(reminder=True),
            r"kw\.Invoice: missing a required argument: 'invoice_id'",
        ),
        (lambda: Invoice.perform_at(0, 1, 2), r"kw\.Invoice: too many positional arguments"),
        (
            lambda: send_welcome.perform_bulk([[1], [2, 3]]),
            r"perform_bulk item 1: kw\.Welcome: too many positional arguments",
        ),
        (
            lambda: send_welcome.perform_bulk([[1], [object()]]),
            r"perform_bulk item 1: kw\.Welcome: argument 'user_id' \(args\[0\]\) is a builtins\.object",
        ),
        (
            lambda: flaky.perform_bulk([[1]]),
            r"perform_bulk item 0: kw\.Flaky: missing a required (keyword-only )?argument: 'attempt_limit'",
        ),
    ],
)
def test_a_call_the_job_cannot_take_fails_at_enqueue_naming_job_and_argument(
    wurk: Wurk, r: Any, call: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        call()
    assert r.dbsize() == 0


def test_a_job_without_its_own_perform_takes_any_call(wurk: Wurk, r: Any) -> None:
    RubyOnly.perform_async(1, 2, flag=True)
    [payload] = queue_entries(r)
    assert (payload["args"], payload["kwargs"]) == ([1, 2], {"flag": True})


def test_keywords_survive_a_retry(wurk: Wurk, r: Any) -> None:
    flaky.perform_async(5, attempt_limit=2)
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: r.zcard("retry") == 1)
    finally:
        worker.stop()
    [entry] = [json.loads(m) for m in r.zrange("retry", 0, -1)]
    assert (entry["args"], entry["kwargs"], entry["retry_count"]) == ([5], {"attempt_limit": 2}, 0)
    assert calls == [("flaky", [5], {"attempt_limit": 2})]


def test_a_payload_whose_kwargs_is_no_object_is_buried_with_the_reason(wurk: Wurk, r: Any) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", json.dumps({"class": "kw.Welcome", "queue": "default", "args": [1],
                                         "kwargs": ["not", "an", "object"], "jid": "0123456789abcdef01234567",
                                         "retry": 5, "created_at": 1.0, "enqueued_at": 1.0}))  # fmt: skip
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: r.zcard("dead") == 1)
    finally:
        worker.stop()
    [entry] = [json.loads(m) for m in r.zrange("dead", 0, -1)]
    assert "'kwargs' must be a JSON object" in entry["error_message"]
    assert r.zcard("retry") == 0 and calls == []


def test_unique_jobs_tell_keyword_calls_apart(wurk: Wurk, r: Any) -> None:
    first = unique_welcome.perform_async(user_id=1)
    assert first is not None
    assert unique_welcome.perform_async(user_id=1) is None  # the same call: refused
    second = unique_welcome.perform_async(user_id=2)
    third = unique_welcome.perform_async(1)  # positional: another call in the payload's terms
    assert second is not None and third is not None and len({first, second, third}) == 3
    assert lock_owner(unique_welcome, [], kwargs={"user_id": 1}) == first
    assert lock_owner(unique_welcome, [], kwargs={"user_id": 2}) == second
    assert lock_owner(unique_welcome, [1]) == third


@job(wire_name="kw.Secret", encrypt=True)
def secret(card: str) -> None: ...


# Registered only inside its test: `manage.py check` elsewhere must find no encrypt=True job.
registry.unregister("kw.Secret")


def test_an_encrypted_job_refuses_keyword_arguments(wurk: Wurk, r: Any) -> None:
    registry.register(secret.job_class)
    try:
        with pytest.raises(
            TypeError, match=r"kw\.Secret: an encrypt=True job .* keyword arguments would travel in clear"
        ):
            secret.perform_async(card="4242")
        assert r.dbsize() == 0
    finally:
        registry.unregister("kw.Secret")


def test_activejob_keywords_become_rubys_keyword_hash_and_come_back(wurk: Wurk, r: Any) -> None:
    mailer.perform_async(3, subject="Hi")
    [payload] = queue_entries(r, "default")
    assert "kwargs" not in payload
    [data] = payload["args"]
    # What Rails writes for `MailerJob.perform_later(3, subject: "Hi")`.
    assert data["arguments"] == [3, {"subject": "Hi", "_aj_ruby2_keywords": ["subject"]}]
    assert activejob.arguments(payload) == ([3], {"subject": "Hi"})
    mailer.perform_inline(4, subject="Yo")
    assert calls == [("mailer", [4], {"subject": "Yo"})]
