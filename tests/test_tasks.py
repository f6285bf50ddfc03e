"""Django's task API end to end on WurkBackend with a real worker."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.db import transaction
from django.utils import timezone

from django_wurk import Wurk
from django_wurk.core.config import QueueSpec
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import tasks

try:
    from django.tasks import TaskResultStatus
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:
    from django_tasks import TaskResultStatus  # type: ignore[no-redef]
    from django_tasks.exceptions import (
        InvalidTaskError,  # type: ignore[no-redef]
        TaskResultDoesNotExist,  # type: ignore[no-redef]
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[no-redef]


@pytest.fixture
def worker(wurk: Wurk, test_config: Any) -> Iterator[Launcher]:
    wurk.configure(test_config.replace(queues=(QueueSpec("default"), QueueSpec("tasks"))))
    launcher = Launcher(wurk)
    launcher.start()
    yield launcher
    launcher.stop()


def finished(result: Any) -> bool:
    result.refresh()
    return bool(result.is_finished)


def test_a_task_runs_and_its_result_comes_back(wurk: Wurk, r: Any, worker: Launcher) -> None:
    result = tasks.add.enqueue(2, 3, scale=10)
    assert result.status == TaskResultStatus.READY and len(result.id) == 24
    wait_for(lambda: finished(result))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 50
    assert result.args == [2, 3] and result.kwargs == {"scale": 10}
    assert 0 < r.ttl(f"wurk-task-result:{result.id}") <= 3600  # RESULT_TTL from OPTIONS, once finished
    assert result.attempts == 1 and result.worker_ids[0].endswith(f":{__import__('os').getpid()}")
    assert result.enqueued_at <= result.started_at <= result.finished_at
    fetched = tasks.add.get_result(result.id)
    assert fetched.return_value == 50 and fetched.status == TaskResultStatus.SUCCESSFUL


def test_the_payload_is_a_sidekiq_job_named_after_the_task(wurk: Wurk, r: Any) -> None:
    result = tasks.add.enqueue(1, 2, scale=3)
    [payload] = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    assert payload["class"] == "tests.jobsapp.tasks.add" and payload["jid"] == result.id
    assert payload["args"] == [1, 2] and payload["kwargs"] == {"scale": 3}
    # Until the run finishes its record outlives any retry schedule; RESULT_TTL counts from the end.
    assert r.ttl(f"wurk-task-result:{result.id}") > 29 * 24 * 3600


def test_retries_fill_errors_and_attempts_then_failed(wurk: Wurk, r: Any, worker: Launcher) -> None:
    result = tasks.flaky_task.enqueue("x")  # retry=1 given through @task(...)
    wait_for(lambda: r.zcard("retry") == 1)
    result.refresh()
    assert result.status == TaskResultStatus.READY  # waiting in the retry set
    assert result.attempts == 1 and len(result.errors) == 1
    assert result.errors[0].exception_class is ValueError
    assert "task failed: x" in result.errors[0].traceback
    [(member, _)] = r.zrange("retry", 0, -1, withscores=True)
    assert json.loads(member)["retry"] == 1 and json.loads(member)["queue"] == "tasks"
    r.zadd("retry", {member: time.time() - 1}, xx=True)
    wait_for(lambda: finished(result))
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2 and len(result.errors) == 2
    assert r.zcard("dead") == 1
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018


def test_retry_false_fails_at_once(wurk: Wurk, worker: Launcher) -> None:
    result = tasks.fails_once_for_good.enqueue()
    wait_for(lambda: finished(result))
    assert result.status == TaskResultStatus.FAILED and result.errors[0].exception_class is KeyError


def test_takes_context_and_async_tasks(wurk: Wurk, worker: Launcher) -> None:
    ctx = tasks.with_context.enqueue("hello")
    doubled = tasks.async_double.enqueue(21)
    wait_for(lambda: finished(ctx) and finished(doubled))
    assert ctx.return_value == {"id": ctx.id, "attempt": 1, "note": "hello"}
    assert doubled.return_value == 42


def test_async_tasks_run_on_the_worker_threads_own_loop(wurk: Wurk, test_config: Any) -> None:
    """Not a fresh loop in a helper thread per run: a client bound to a loop survives between runs."""
    wurk.configure(test_config.replace(concurrency=1))
    tasks.task_loops.clear()
    launcher = Launcher(wurk)
    launcher.start()
    try:
        first, second = tasks.loop_bound.enqueue(), tasks.loop_bound.enqueue()
        wait_for(lambda: finished(first) and finished(second))
    finally:
        launcher.stop()
    assert first.return_value == second.return_value == "wurk-processor-0"
    assert tasks.task_loops[0] is tasks.task_loops[1]


def test_run_after_defers_into_the_schedule(wurk: Wurk, r: Any, worker: Launcher) -> None:
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    [(member, score)] = r.zrange("schedule", 0, -1, withscores=True)
    assert json.loads(member)["jid"] == later.id and score == pytest.approx(time.time() + 3600, abs=5)
    soon = tasks.add.using(run_after=timezone.now() + timedelta(seconds=0.3)).enqueue(2, 2)
    wait_for(lambda: finished(soon))
    assert soon.return_value == 4
    assert tasks.add.get_result(later.id).status == TaskResultStatus.READY


def test_each_signal_fires_once_with_its_status(wurk: Wurk, worker: Launcher) -> None:
    events: list[tuple[str, str, str]] = []

    def on(name: str) -> Any:
        def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
            events.append((name, task_result.id, str(task_result.status)))

        return receiver

    receivers = {sig: on(name) for sig, name in ((task_enqueued, "enqueued"), (task_started, "started"),
                                                  (task_finished, "finished"))}  # fmt: skip
    for sig, receiver in receivers.items():
        sig.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 2)
        wait_for(lambda: len([e for e in events if e[1] == result.id]) == 3)
    finally:
        for sig, receiver in receivers.items():
            sig.disconnect(receiver)
    ours = [(e[0], e[2]) for e in events if e[1] == result.id]
    # "enqueued" is sent by the client after the push, so a fast worker may start first.
    assert sorted(ours) == [("enqueued", "READY"), ("finished", "SUCCESSFUL"), ("started", "RUNNING")]
    assert ours.index(("started", "RUNNING")) < ours.index(("finished", "SUCCESSFUL"))


def test_a_tasks_priority_orders_it_in_its_queue_and_unknown_results_do_not_exist(wurk: Wurk, r: Any) -> None:
    result = tasks.add.using(priority=10).enqueue(1, 2)
    tasks.add.enqueue(3, 4)  # priority 0: its queue's own list, as before priorities
    [payload] = [json.loads(x) for x in r.lrange("queue:default@10", 0, -1)]
    assert payload["jid"] == result.id and payload["priority"] == 10 and payload["queue"] == "default"
    assert "priority" not in json.loads(r.lindex("queue:default", 0))
    with pytest.raises(InvalidTaskError, match="priority"):
        tasks.add.using(priority=101)  # Django's own range check
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("0" * 24)


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_transaction_waits_for_the_commit(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        result = tasks.record_task.enqueue("after commit")
        assert r.llen("queue:default") == 0
    assert json.loads(r.lindex("queue:default", 0))["jid"] == result.id
    with pytest.raises(RuntimeError), transaction.atomic():
        gone = tasks.record_task.enqueue("rolled back")
        raise RuntimeError("rollback")
    assert r.llen("queue:default") == 1
    assert tasks.record_task.get_result(result.id).status == TaskResultStatus.READY
    with pytest.raises(TaskResultDoesNotExist):  # no result record is left behind by a rollback
        tasks.record_task.get_result(gone.id)


# Every database: on Django 6.1 the model checks ask each whether it supports JSONField,
# which the Schedule model has.
@pytest.mark.django_db(databases="__all__")
def test_check_reports_queues_no_worker_listens_to(wurk: Wurk, settings: Any) -> None:
    assert [m for m in run_checks() if m.id == "django_wurk.I001"] == []
    settings.WURK = {**settings.WURK, "QUEUES": ["default"]}  # TASKS also allows "tasks"
    messages = [m for m in run_checks() if m.id == "django_wurk.I001"]
    assert [m.msg for m in messages] == [
        "TASKS['default'] may enqueue onto queue 'tasks', which WURK['QUEUES'] does not list"
    ]


# Without the backport ------------------------------------------------------------------

BLOCKED_SCRIPT = """
import importlib.abc, sys

class NoDjangoTasks(importlib.abc.MetaPathFinder):
    '''Django 5.2 without the [tasks] extra: neither django.tasks nor the backport exists.'''

    def find_spec(self, name, path=None, target=None):
        for missing in ("django_tasks", "django.tasks"):
            if name == missing or name.startswith(missing + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoDjangoTasks())
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_wurk"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    TASKS={"default": {"BACKEND": "django_wurk.tasks.WurkBackend"}},
)
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", "check"])
"""


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh Python, from the repository's root."""
    import sys
    from pathlib import Path

    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_the_backport_every_command_says_which_extra_to_install() -> None:
    proc = run_script(BLOCKED_SCRIPT)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), proc.stderr
    assert 'pip install "django-wurk[tasks]"' in last and "django_wurk.tasks.WurkBackend" in last


CELERY_LAYOUT_SCRIPT = BLOCKED_SCRIPT.replace(
    '    TASKS={"default": {"BACKEND": "django_wurk.tasks.WurkBackend"}},\n', ""
).replace(
    "from django.core.management import",
    # proj/celery.py, imported from proj/__init__.py as docs/migrate-from-celery.md says
    'from django_wurk.celery import Celery\napp = Celery("proj")\napp.autodiscover_tasks()\n'
    "from django.core.management import",
)


def test_without_the_backport_celerys_autodiscovery_leaves_every_command_working() -> None:
    """autodiscover_tasks() imports every installed app's tasks module, django_wurk.tasks
    included, and no TASKS names the backend: that must not stop every manage.py command."""
    assert "TASKS=" not in CELERY_LAYOUT_SCRIPT and "autodiscover_tasks()" in CELERY_LAYOUT_SCRIPT
    script = CELERY_LAYOUT_SCRIPT + (
        "import django_wurk.tasks as t\n"
        "assert 'django_wurk.tasks' in sys.modules\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "try:\n"
        "    t.WurkBackend('default', {})\n"
        "except ImproperlyConfigured as exc:\n"
        "    print('made:', exc)\n"
    )
    proc = run_script(script)
    assert proc.returncode == 0, proc.stderr
    assert "System check identified no issues" in proc.stdout
    # The backend itself, made anyway, still says what to install.
    assert "made: TASKS uses django_wurk.tasks.WurkBackend" in proc.stdout
    assert 'pip install "django-wurk[tasks]"' in proc.stdout


def python_blocks(markdown: str) -> list[str]:
    import re

    return re.findall(r"```python\n(.*?)```", markdown, re.S)


def test_the_set_up_section_of_the_docs_works_as_written(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Any
) -> None:
    """docs/tasks.md's first snippets, copied into a project: on Django 6 and on 5.2 alike."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    settings_py, tasks_py, enqueue = python_blocks((root / "docs" / "tasks.md").read_text(encoding="utf-8"))[
        :3
    ]
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "tasks.py").write_text(tasks_py)
    (tmp_path / "settings.py").write_text(
        'SECRET_KEY = "docs"\nDATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}\n'
        + settings_py
    )
    script = (
        "import django\ndjango.setup()\n"
        "from django.core.management import call_command\ncall_command('check')\n"
        "from shop.tasks import send_receipt\n" + enqueue + "print(result.id)\n"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="settings", WURK_REDIS_URL=redis_url,
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(root)]))  # fmt: skip
    env.pop("WURK_TEST_REDIS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    [payload] = [json.loads(p) for p in r.lrange("queue:emails", 0, -1)]
    assert payload["jid"] == proc.stdout.split()[-1] and payload["class"] == "shop.tasks.send_receipt"
    assert payload["args"] == [42] and payload["kwargs"] == {"copy_to": "books@example.com"}
