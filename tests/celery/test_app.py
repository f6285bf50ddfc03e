"""The app object: @app.task, config_from_object, autodiscover_tasks, send_task; signatures."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from django_wurk.celery import Celery, Signature, lookup, signature, states
from django_wurk.celery import task as task_module
from django_wurk.celery.exceptions import ImproperlyConfigured
from django_wurk.celery.task import set_discoverer
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.conftest import queue_entries

app = Celery("proj", broker="redis://ignored")
app.config_from_object(types.SimpleNamespace(CELERY_RESULT_EXPIRES=60, CELERY_TASK_DEFAULT_QUEUE="math"),
                       namespace="CELERY")  # fmt: skip


@app.task(bind=True, name="proj.hello")
def hello(self: Any, who: str) -> str:
    return f"hello {who} from {self.name}"


def test_app_task_goes_to_the_apps_default_queue(wurk: Any, r: Any) -> None:
    assert lookup("proj.hello") is hello and app.tasks["proj.hello"] is hello
    hello.delay("you")
    assert queue_entries(r, "math")[0]["class"] == "proj.hello"


def test_app_task_uses_the_apps_result_expiry(celery_workers: Launcher, r: Any) -> None:
    result = hello.delay("you")
    assert result.get(timeout=10) == "hello you from proj.hello"
    assert 0 < r.ttl(f"celery-task-meta-{result.id}") <= 60


def test_send_task_by_name_runs_a_task_this_process_may_not_define(celery_workers: Launcher, r: Any) -> None:
    assert app.send_task("custom.multiply", (6, 7)).get(timeout=10) == 42
    app.send_task("elsewhere.defined", (1,), {"a": 2}, queue="nobody-reads")
    [payload] = queue_entries(r, "nobody-reads")
    assert payload["class"] == "elsewhere.defined" and payload["kwargs"] == {"a": 2}


def test_signatures_are_json_and_callable(celery_workers: Launcher) -> None:
    sig = tasks.add.s(2, scale=3)
    assert json.loads(json.dumps(sig)) == sig  # a plain dict: it can ride in a payload
    back = signature(json.loads(json.dumps(sig)))
    assert isinstance(back, Signature) and back.task == "tests.celery.celery_style_tasks.add"
    assert back.delay(5).get(timeout=10) == 21  # partial args come first, as in Celery
    frozen = tasks.add.si(1, 1)
    assert frozen.clone((9,)).args == [1, 1] and frozen(5) == 2
    assert sig.set(queue="math").options == {"queue": "math"}


def test_task_options_are_checked_at_definition() -> None:
    with pytest.raises(ImproperlyConfigured, match="serializer"):
        app.task(serializer="pickle", name="proj.bad")(lambda: None)
    with pytest.raises(ImproperlyConfigured, match="queue"):
        app.task(queue="no spaces", name="proj.bad2")(lambda: None)
    with pytest.raises(TypeError, match="unknown task option"):
        app.task(name="proj.bad3", colour="red")(lambda: None)
    # Celery 5.7's: True is what reliable fetch does anyway; False cannot be honoured.
    assert app.task(name="proj.lost", retry_on_worker_lost=True)(lambda: None).name == "proj.lost"
    with pytest.raises(ImproperlyConfigured, match="retry_on_worker_lost=False is not supported"):
        app.task(name="proj.lost2", retry_on_worker_lost=False)(lambda: None)


def test_apply_runs_here_and_eager_mode(wurk: Any, r: Any) -> None:
    assert tasks.add.apply((1, 2), {"scale": 2}).get() == 6
    failed = tasks.boom.apply(("x",))
    assert failed.state == states.FAILURE and isinstance(failed.result, ValueError)
    eager = Celery("eager", task_always_eager=True)
    twice = eager.task(name="eager.twice")(lambda x: x * 2)
    assert twice.delay(4).get() == 8 and r.llen("queue:default") == 0
    assert r.keys("celery-task-meta-*") == []  # an eager run keeps its result in the EagerResult only
    assert tasks.whoami.apply().get()["id"] is not None


def test_autodiscover_imports_each_apps_tasks_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_module, "_discoverer", None)  # put back after the test
    app.autodiscover_tasks(["tests.celery"], related_name="discovered_tasks")
    assert "tests.celery.discovered_tasks" in sys.modules and lookup("discovered.ping") is not None
    app.autodiscover_tasks(["tests.jobsapp"], related_name="no_such_module")  # missing: skipped
    asked: list[str] = []
    set_discoverer(asked.append)  # what the Django app does when it is ready
    app.autodiscover_tasks()
    assert asked == ["tasks"]
