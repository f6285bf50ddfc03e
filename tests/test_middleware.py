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
