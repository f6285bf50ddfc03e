"""Ruby pushes, Python runs: jobs from ``Sidekiq::Client`` reach our worker unchanged."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.worker import Launcher
from tests.conftest import wait_for

ARGS = [
    1,
    -2,
    3.25,
    1e-7,
    "two",
    "ünïcødé ✓ 日本",
    {"nested": {"list": [1, None, True, False]}},
    [],
    {},
    None,
    True,
]


@pytest.fixture
def python_worker(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    yield worker
    worker.stop()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


def test_client_push_runs_with_identical_arguments(
    rb: Callable[..., Any], r: Any, python_worker: Launcher
) -> None:
    jid = rb(op="push", item={"class": "PlainJob", "queue": "default", "args": ARGS})
    assert isinstance(jid, str) and len(jid) == 24
    wait_for(lambda: seen(r, "PlainJob"))
    assert seen(r, "PlainJob") == [ARGS]
