"""The same tasks module runs on real Celery and on django-wurk, with only the import changed.

Also: the arguments we store are byte-for-byte what Celery's JSON serializer puts in a
message body, and a real Celery ``AsyncResult`` reads the results our workers write.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import celery
import pytest
from kombu.serialization import dumps as kombu_dumps

from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as wurk_tasks
from tests.conftest import queue_entries

# Celery 5.7 deprecates the queue= task option our tasks module uses (task_routes is its new way).
pytestmark = pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")

SOURCE = Path(wurk_tasks.__file__).read_text(encoding="utf-8")
IMPORT_LINE = "from django_wurk.celery import shared_task"


@pytest.fixture(scope="module")
def celery_app() -> Iterator[celery.Celery]:
    app = celery.Celery("twin", set_as_current=True)
    app.conf.task_always_eager = True  # runs each call in this thread, through Celery's own tracer
    yield app
    app.close()


@pytest.fixture(scope="module")
def celery_tasks(celery_app: celery.Celery) -> types.ModuleType:
    """celery_style_tasks.py with its import line pointing at Celery."""
    assert SOURCE.count("django_wurk") == 1 and IMPORT_LINE in SOURCE  # the only change needed
    name = "tests.celery.celery_twin"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(
        compile(SOURCE.replace(IMPORT_LINE, "from celery import shared_task"), name, "exec"), module.__dict__
    )
    return module


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as exc:
        return type(exc).__name__, str(exc)


CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("add", (2, 3), {"scale": 10}),
    ("multiply", (6, 7), {}),
    ("flaky", ("f", 2), {}),
    ("flaky", ("g", 5), {}),
    ("retry_with_exc", ("h",), {}),
    ("auto", ("i", 1), {}),
    ("auto", ("j", 0), {"permanent": True}),
    ("boom", ("kaput",), {}),
    ("echo_types", (datetime(2026, 1, 2, tzinfo=UTC), Decimal("2.50"), uuid.UUID(int=7), b"\x00\xff"),
     {"day": date(2026, 5, 1)}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "kwargs"), CALLS, ids=[f"{c[0]}{c[1][:1]}" for c in CALLS])
def test_each_call_has_the_same_outcome_on_celery_and_on_wurk(
    celery_tasks: types.ModuleType, celery_workers: Launcher, name: str, args: Any, kwargs: Any
) -> None:
    wurk_tasks.CALLS.clear()
    celery_tasks.CALLS.clear()
    on_celery = outcome(lambda: getattr(celery_tasks, name).apply_async(args, kwargs).get(timeout=20))
    on_wurk = outcome(lambda: getattr(wurk_tasks, name).apply_async(args, kwargs).get(timeout=20))
    if name == "flaky" and args[1] == 5:
        # Celery's message names the task by its module; ours are in another module. Same text otherwise.
        assert on_celery[0] == on_wurk[0] == "MaxRetriesExceededError"
    else:
        assert on_wurk == on_celery
    assert wurk_tasks.CALLS == celery_tasks.CALLS  # the same runs, with the same request.retries


def test_bound_request_matches_celery(celery_tasks: types.ModuleType, celery_workers: Launcher) -> None:
    task_id = str(uuid.uuid4())
    on_celery = celery_tasks.whoami.apply_async((1,), {"b": 2}, task_id=task_id).get()
    on_wurk = wurk_tasks.whoami.apply_async((1,), {"b": 2}, task_id=task_id).get(timeout=10)
    assert on_celery["id"] == on_wurk["id"] == task_id
    assert on_celery["retries"] == on_wurk["retries"] == 0
    assert list(on_celery["args"]) == on_wurk["args"] and on_celery["kwargs"] == on_wurk["kwargs"]


def test_arguments_are_stored_as_celerys_json_serializer_writes_them(wurk: Any, r: Any) -> None:
    args = [datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), Decimal("0.1"), uuid.UUID(int=1), b"bin\xff", "é"]
    kwargs = {"when": date(2026, 1, 1), "nested": {"amount": Decimal("3")}}
    wurk_tasks.whoami.apply_async(args, kwargs)  # takes any arguments (they are checked when sent)
    [payload] = queue_entries(r)
    _, _, body = kombu_dumps([args, kwargs, {}], serializer="json")
    celery_args, celery_kwargs, _ = json.loads(body)
    assert payload["args"] == celery_args and payload["kwargs"] == celery_kwargs


def test_celerys_own_async_result_reads_our_results(redis_url: str, celery_workers: Launcher) -> None:
    reader = celery.Celery("reader", backend=redis_url, set_as_current=False)
    try:
        ok = wurk_tasks.add.delay(20, 22)
        failed = wurk_tasks.boom.delay("from wurk")
        assert ok.get(timeout=10) == 42
        with pytest.raises(ValueError):
            failed.get(timeout=10)
        assert reader.AsyncResult(ok.id).get(timeout=5) == 42
        theirs = reader.AsyncResult(failed.id)
        assert theirs.state == "FAILURE"
        with pytest.raises(ValueError, match="from wurk"):
            theirs.get(timeout=5)
        # Celery's AsyncResult unsubscribes when collected: collect it while Redis runs.
        del theirs
        gc.collect()
    finally:
        reader.close()


def test_canvas_gives_the_same_results(celery_tasks: types.ModuleType, celery_workers: Launcher) -> None:
    def flows(m: types.ModuleType, canvas: Any) -> list[Any]:
        return [
            canvas.chain(m.add.s(1, 2), m.add.s(10), m.multiply.s(2)).apply_async().get(timeout=10),
            (m.add.s(2, 2) | m.add.si(5, 5)).apply_async().get(timeout=10),
            canvas.group(m.add.s(i, i) for i in range(4)).apply_async().get(timeout=10),
            canvas.chord([m.add.s(i, 1) for i in range(3)])(m.collect.s("c")).get(timeout=10),
        ]

    import django_wurk.celery as wurk_canvas

    assert flows(wurk_tasks, wurk_canvas) == flows(celery_tasks, celery) == [26, 10, [0, 2, 4, 6], [1, 2, 3]]
