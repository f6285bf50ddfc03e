"""The mechanical swap of docs/migrate-from-celery.md: ``celery`` -> ``django_wurk.celery`` in a
module's imports, and the module works; each name it imports exists under Celery too."""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from django_wurk.celery import states
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for

#: A Celery project's tasks module, importing from every Celery module the docs name.
SAMPLE = """
from celery import Celery, Task, chain, chord, group, shared_task, signature, states
from celery.exceptions import MaxRetriesExceededError, Retry, SoftTimeLimitExceeded, TimeLimitExceeded
from celery.result import AsyncResult, GroupResult, allow_join_result
from celery.schedules import crontab, schedule
from celery.signals import task_failure, task_postrun, task_prerun, task_success, worker_ready
from celery.utils.log import get_task_logger

logger = get_task_logger(__name__)

SEEN = []


@shared_task(name="swap.add", time_limit=10, soft_time_limit=5, rate_limit="100/s")
def add(x, y):
    return x + y


@task_success.connect(sender="swap.add")
def remember(sender=None, result=None, **kwargs):
    SEEN.append(("success", sender.name, result))


@task_prerun.connect
def started(sender=None, task_id=None, task=None, args=None, kwargs=None, **more):
    if task.name == "swap.add":
        SEEN.append(("prerun", task_id, list(args)))


BEAT = {"nightly": {"task": "swap.add", "schedule": crontab(minute=0, hour=3), "args": (1, 2)},
        "often": {"task": "swap.add", "schedule": schedule(run_every=300), "args": (3, 4)}}
"""


def swap(source: str) -> str:
    """The docs' swap: every ``celery`` module in an import becomes ``django_wurk.celery``'s."""
    return re.sub(r"^from celery\b", "from django_wurk.celery", source, flags=re.M)


def load(source: str, name: str, tmp_path: Path) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def imported_names(source: str) -> list[tuple[str, str]]:
    return [
        (module, name.strip())
        for module, names in re.findall(r"^from (\S+) import (.+)$", source, flags=re.M)
        for name in names.split(",")
    ]


def test_every_name_the_sample_imports_exists_under_celery_and_here() -> None:
    pytest.importorskip("celery")
    for module, name in imported_names(SAMPLE):
        assert hasattr(importlib.import_module(module), name), (module, name)
        ours = importlib.import_module(module.replace("celery", "django_wurk.celery", 1))
        assert getattr(ours, name) is not None, (module, name)


def test_the_swapped_module_runs_on_a_worker(celery_workers: Launcher, tmp_path: Path) -> None:
    swapped = swap(SAMPLE)
    assert "from django_wurk.celery.exceptions import" in swapped and "from celery" not in swapped
    module: Any = load(swapped, "swap_sample", tmp_path)
    try:
        from django_wurk.celery import exceptions

        assert module.SoftTimeLimitExceeded is exceptions.SoftTimeLimitExceeded
        assert module.SoftTimeLimitExceeded.__name__ == "SoftTimeLimitExceeded"
        result = module.add.delay(2, 3)
        assert isinstance(result, module.AsyncResult)
        assert result.get(timeout=10) == 5 and result.state == states.SUCCESS
        wait_for(lambda: ("success", "swap.add", 5) in module.SEEN)  # sent after the result is stored
        assert ("prerun", result.id, [2, 3]) in module.SEEN
        from django_wurk.celery.schedules import periodic_entries

        crons = {e["cron"] for e in periodic_entries(module.BEAT).entries}
        assert crons == {"0 3 * * *", "*/5 * * * *"}
    finally:
        sys.modules.pop("swap_sample", None)


def test_worker_signals_are_django_wurks(tmp_path: Path) -> None:
    from django_wurk import signals
    from django_wurk.celery import signals as celery_signals

    assert celery_signals.worker_ready is signals.worker_ready
    assert celery_signals.worker_shutdown is signals.worker_stopping
    with pytest.raises(AttributeError):
        celery_signals.before_task_publish  # noqa: B018 (nothing publishes Celery messages here)


def test_task_failure_and_postrun_signals_carry_celerys_arguments(celery_workers: Launcher) -> None:
    from django_wurk.celery.signals import task_failure, task_postrun
    from tests.celery import celery_style_tasks as tasks

    failures: list[Any] = []
    done = threading.Event()

    def failed(sender: Any = None, task_id: Any = None, exception: Any = None, **kwargs: Any) -> None:
        failures.append((sender.name, task_id, type(exception).__name__, kwargs["args"]))

    def postrun(sender: Any = None, state: Any = None, **kwargs: Any) -> None:
        if state == states.FAILURE:
            done.set()

    task_failure.connect(failed, sender=tasks.boom)
    task_postrun.connect(postrun)
    try:
        result = tasks.boom.delay("bad")
        assert done.wait(10)
        assert failures == [(tasks.boom.name, result.id, "ValueError", ["bad"])]
    finally:
        task_failure.disconnect(failed, sender=tasks.boom)
        task_postrun.disconnect(postrun)


def test_task_retry_and_task_revoked_signals(celery_workers: Launcher) -> None:
    from datetime import UTC, datetime

    from django_wurk.celery import TaskRevokedError
    from django_wurk.celery.signals import task_retry, task_revoked
    from tests.celery import celery_style_tasks as tasks

    retried: list[Any] = []
    revoked: list[Any] = []

    def on_retry(sender: Any = None, request: Any = None, reason: Any = None, **kwargs: Any) -> None:
        retried.append((sender.name, request.id, request.retries, type(reason).__name__))

    def on_revoked(sender: Any = None, request: Any = None, expired: Any = None, **kwargs: Any) -> None:
        revoked.append((sender.name, request.id, expired))

    task_retry.connect(on_retry)
    task_revoked.connect(on_revoked)
    try:
        first = tasks.flaky.delay("signals", 1)
        assert first.get(timeout=10) == "ok after 1"
        assert retried == [(tasks.flaky.name, first.id, 0, "Retry")]
        late = tasks.add.apply_async((1, 2), expires=datetime(2000, 1, 1, tzinfo=UTC))
        with pytest.raises(TaskRevokedError):
            late.get(timeout=10)
        wait_for(lambda: revoked == [(tasks.add.name, late.id, True)])  # sent after the record
    finally:
        task_retry.disconnect(on_retry)
        task_revoked.disconnect(on_revoked)
