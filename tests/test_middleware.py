"""Middleware chains (``django_wurk.core.middleware``): what client middleware may do to a
push, and Sidekiq's verbs for editing a chain."""

from __future__ import annotations

from typing import Any

import pytest

from django_wurk import Wurk
from tests.conftest import queue_entries
from tests.jobsapp import jobs


def test_client_middleware_can_change_or_drop_a_push(wurk: Wurk, r: Any) -> None:
    seen: list[tuple[str, str]] = []

    class Stamp:
        def __init__(self, value: str) -> None:
            self.value = value

        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            seen.append((job_class, queue))
            payload["stamp"] = self.value
            return call_next()

    class DropOdd:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            return None if payload["args"][0] % 2 else call_next()

    wurk.client_middleware.add(Stamp, "s1")
    wurk.client_middleware.add(DropOdd)
    assert jobs.echo.perform_async(1) is None
    jid = jobs.echo.perform_async(2)
    assert jid is not None
    [payload] = queue_entries(r)
    assert payload["stamp"] == "s1" and payload["args"] == [2]
    assert seen == [("tests.jobsapp.jobs.echo", "default")] * 2
    assert jobs.echo.perform_bulk([(3,), (4,)])[0] is None


def test_middleware_chain_editing_verbs(wurk: Wurk) -> None:
    order: list[str] = []

    def make(name: str) -> type:
        class M:
            def __call__(self, *args: Any) -> Any:
                order.append(name)
                return args[-1]()

        M.__name__ = name
        return M

    a, b, c, d = make("a"), make("b"), make("c"), make("d")
    chain = wurk.server_middleware
    chain.add(a)
    chain.add(c)
    chain.insert_before(c, b)
    chain.insert_after(c, d)
    chain.prepend(d)  # moves d to the front
    chain.remove(a)
    chain.invoke(lambda: order.append("job"), None, {}, "q")
    assert order == ["d", "b", "c", "job"]
    with pytest.raises(ValueError, match="not in this middleware chain"):
        chain.insert_before(a, b)


def test_a_middleware_with_payload_keys_runs_only_for_payloads_holding_one(wurk: Wurk) -> None:
    order: list[str] = []

    class Always:
        def __call__(self, *args: Any) -> Any:
            order.append("always")
            return args[-1]()

    class Keyed:
        payload_keys = ("bid", "unique_for")

        def __call__(self, *args: Any) -> Any:
            order.append("keyed")
            return args[-1]()

    chain = wurk.server_middleware
    chain.clear()
    chain.add(Keyed)
    for payload in ({}, {"bid": "b"}, {"unique_for": 0}, {"other": 1}):
        chain.invoke(lambda: order.append("job"), None, payload, "q")
    assert order == ["job", "keyed", "job", "keyed", "job", "job"]
    order.clear()
    chain.prepend(Always)  # an edit after an invoke takes effect at once
    chain.invoke(lambda: order.append("job"), None, {"bid": "b"}, "q")
    chain.invoke(lambda: order.append("job"), None, {}, "q")
    assert order == ["always", "keyed", "job", "always", "job"]
    order.clear()
    with chain.preserved():
        chain.remove(Keyed)
        chain.invoke(lambda: order.append("job"), None, {"bid": "b"}, "q")
    chain.invoke(lambda: order.append("job"), None, {"bid": "b"}, "q")  # restored
    assert order == ["always", "job", "always", "keyed", "job"]


def test_a_ruby_pushed_job_carrying_an_option_still_meets_its_middleware(wurk: Wurk, r: Any) -> None:
    from django_wurk.core.features.expiring.middleware import ExpiryServerMiddleware

    assert ExpiryServerMiddleware.payload_keys == ("expires_at", "deadline_at")
    ran: list[Any] = []
    payload = {"class": "echo", "args": [1], "jid": "0" * 24, "queue": "default", "expires_at": 1.0}
    with wurk.server_middleware.preserved():
        wurk.server_middleware.clear()
        wurk.server_middleware.add(ExpiryServerMiddleware, wurk)
        wurk.server_middleware.invoke(lambda: ran.append("job"), None, payload, "default")
        assert ran == []  # expired in 1970: skipped, as before payload_keys
        wurk.server_middleware.invoke(lambda: ran.append("job"), None, {**payload, "expires_at": None}, "q")
        assert ran == ["job"]


def test_client_keys_skip_only_in_a_chain_where_every_middleware_declares_what_it_adds(wurk: Wurk) -> None:
    calls: list[str] = []

    class Keyed:
        client_keys = ("wanted",)
        adds_keys: frozenset[str] = frozenset()

        def __call__(self, *args: Any) -> Any:
            calls.append("keyed")
            return args[-1]()

    class AddsWanted:
        """Declared: it adds ``wanted``, so ``Keyed`` can never be skipped beside it."""

        adds_keys = frozenset({"wanted"})

        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            payload["wanted"] = True
            return call_next()

    class Undeclared:
        def __call__(self, *args: Any) -> Any:
            return args[-1]()

    def push(payload: dict[str, Any]) -> None:
        wurk.client_middleware.invoke(lambda: payload, "X", payload, "q")

    with wurk.client_middleware.preserved():
        chain = wurk.client_middleware
        chain.clear()
        assert chain.empty
        chain.add(Keyed)
        assert not chain.empty
        push({})
        push({"wanted": 1})
        assert calls == ["keyed"]  # skipped without its key, called with it
        calls.clear()
        chain.prepend(Undeclared)  # could add any key on the way: no skipping at all
        push({})
        assert calls == ["keyed"]
        calls.clear()
        chain.remove(Undeclared)
        chain.prepend(AddsWanted)  # declares that it adds Keyed's key
        push({})
        assert calls == ["keyed"]
        calls.clear()
        chain.remove(AddsWanted)
        active: list[bool] = [False]
        Keyed.client_active = staticmethod(lambda: active[0])  # type: ignore[attr-defined]
        chain.add(Keyed)  # re-added: the plan is built again
        push({})
        active[0] = True  # the context asks for it, whatever the keys
        push({})
        assert calls == ["keyed"]
    assert not wurk.client_middleware.empty  # the app's own chain, restored


def test_built_in_client_middleware_still_acts_when_an_outer_one_adds_its_option(wurk: Wurk, r: Any) -> None:
    """An application middleware that sets ``expires_in`` on the way in: expiry must see it,
    although the payload had no such key when the chain started."""

    class Expire:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            payload["expires_in"] = 60
            return call_next()

    with wurk.client_middleware.preserved():
        wurk.client_middleware.prepend(Expire)
        jobs.echo.perform_async(1)
        jobs.echo.perform_bulk([(2,), (3,)])
    entries = queue_entries(r)
    assert len(entries) == 3
    assert all(isinstance(p.get("expires_at"), float) for p in entries)
