"""A ``django.tasks`` backend: every ``@task`` function runs on django-wurk workers.

    TASKS = {"default": {"BACKEND": "django_wurk.tasks.WurkBackend", "QUEUES": ["default"],
                         "OPTIONS": {"RESULT_TTL": 86400, "ON_COMMIT": True, "RETRY": 25}}}

Works with Django 6's ``django.tasks`` and, on Django 5.2, with the ``django-tasks``
backport (the same API under ``django_tasks``).

Each task run is a Sidekiq job: ``class`` is the task's module path (so dashboards name
it), ``args`` its positional arguments and a ``kwargs`` payload key its keyword ones, and
the jid is the ``TaskResult`` id. Retries, the dead set and the on-commit behaviour are
the engine's. Django's result model has four states, so a run waiting in the schedule or
retry set is READY (with ``errors`` and ``attempts`` filled in), a running one RUNNING,
and one that died, was discarded or had retries off FAILED.

Decisions: a task's ``priority`` (-100...100, Django's range) is the job's priority inside
its queue (docs/priority.md): higher runs first, 0 is written exactly as before. Sidekiq options
(``retry``, ``retry_for``, ``retry_queue``, ``dead``, ``backtrace``, ``tags``) are given as
``@task(...)`` keyword arguments (Django 6.1+ and the backport forward them) or as
backend ``OPTIONS`` defaults in upper case.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from asgiref.sync import iscoroutinefunction
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

if TYPE_CHECKING:  # checked against Django 6's API, which the backport mirrors
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
else:
    try:  # Django 6+
        from django.tasks import TaskContext, TaskResult, TaskResultStatus
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # Django 5.2 with the django-tasks backport
        try:
            import django_tasks  # noqa: F401
        except ModuleNotFoundError as exc:
            if exc.name != "django_tasks":
                raise  # the backport is there but something it needs is not: say that
            from django_wurk.apps import tasks_backend_configured

            needs_tasks = (
                "TASKS uses django_wurk.tasks.WurkBackend, which needs django.tasks: Django 6 has"
                ' it; on Django 5.2 install the backport with pip install "django-wurk[tasks]"'
                ' and add "django_tasks" to INSTALLED_APPS.'
            )
            if tasks_backend_configured():
                # Every manage.py command imports this module when WurkBackend is configured:
                # tell the user what to install rather than which import failed.
                raise ImproperlyConfigured(needs_tasks) from None

            class Missing:
                """Imported with no TASKS naming the backend: by something that imports every
                installed app's tasks module (Celery's app.autodiscover_tasks(), Django's
                autodiscover_modules("tasks")). Nothing here can run, and nothing is asked
                to, so the module stays importable, with this in place of ``Task`` and
                ``BaseTaskBackend``: making a task or the backend says what is missing."""

                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    raise ImproperlyConfigured(needs_tasks)

                def __post_init__(self) -> None:
                    raise ImproperlyConfigured(needs_tasks)

            Task = BaseTaskBackend = Missing
        else:
            from django_tasks import TaskContext, TaskResult, TaskResultStatus
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import Task, TaskError
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started

from django_wurk.conf import app_settings
from django_wurk.core import coroutines, keys, wire
from django_wurk.core.engine import wurk
from django_wurk.core.job import Job, Setter
from django_wurk.core.registry import registry
from django_wurk.core.wire import Payload
from django_wurk.transaction import active_alias

#: Named in ``TASKS`` settings; the rest of this module serves it and may change.
__all__ = ["WurkBackend"]

SIDEKIQ_OPTIONS = ("retry", "retry_for", "retry_queue", "dead", "backtrace", "tags")
DEFAULT_RESULT_TTL = 24 * 3600

#: Tasks by module path, so a worker can find the ``Task`` for a job it fetched.
_tasks: dict[str, Task[Any, Any]] = {}


if TYPE_CHECKING:
    _TaskBase = Task[Any, Any]
else:  # generic only in the type stubs: Django 6's runtime class is not subscriptable
    _TaskBase = Task


@dataclass(frozen=True, slots=True, kw_only=True)
class WurkTask(_TaskBase):
    """A ``Task`` that also carries Sidekiq options; creating one registers its job."""

    retry: bool | int | None = None
    retry_for: int | None = None
    retry_queue: str | None = None
    dead: bool | None = None
    backtrace: bool | int | None = None
    tags: Sequence[str] | None = None

    def __post_init__(self) -> None:
        super(WurkTask, self).__post_init__()
        register_task(self)


def register_task(task: Task[Any, Any]) -> None:
    """Make a worker able to run ``task``: its module path becomes a registered wire name."""
    path = task.module_path
    _tasks[path] = task
    if registry.resolve(path) is None:
        attrs = {
            "wire_name": path,
            "__module__": task.func.__module__,
            "__qualname__": task.func.__qualname__,
        }
        type(task.func.__name__, (TaskJob,), attrs)  # Job.__init_subclass__ registers it


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def _parse(value: bytes | None) -> datetime | None:
    return datetime.fromisoformat(value.decode()) if value else None


#: A run still READY or RUNNING keeps its record at least this long: 25 retries span about
#: 20 days, and a record that expired between two attempts would lose the task's identity.
PENDING_TTL = 30 * 24 * 3600
FINISHED = frozenset({"SUCCESSFUL", "FAILED"})


class ResultStore:
    """Task results in Redis: one hash per run. ``RESULT_TTL`` counts from when a run
    finishes; until then the record lives at least ``PENDING_TTL``."""

    def __init__(self, ttl: int) -> None:
        self.ttl = ttl

    def write(self, jid: str, **fields: Any) -> None:
        key = keys.task_result(jid)
        finished = fields.get("status") in FINISHED
        pipe = wurk.redis.pipeline(transaction=True)
        pipe.hset(key, mapping={k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()})
        pipe.expire(key, self.ttl if finished else max(self.ttl, PENDING_TTL))
        pipe.execute()

    def append(self, jid: str, field: str, item: Any, **fields: Any) -> None:
        key = keys.task_result(jid)
        current = wurk.redis.hget(key, field)
        items = json.loads(current) if current else []
        items.append(item)
        self.write(jid, **{field: items}, **fields)

    def read(self, jid: str) -> dict[str, bytes]:
        data = wurk.redis.hgetall(keys.task_result(jid))
        return {k.decode(): v for k, v in data.items()}


class TaskJob(Job, abstract=True):
    """The job that runs one ``django.tasks`` task, keeping its result record and signals."""

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        path = self.payload["class"]
        task = _tasks[path]
        backend = task.get_backend()
        store = backend.store if isinstance(backend, WurkBackend) else ResultStore(DEFAULT_RESULT_TTL)
        started = _now()
        store.append(self.jid, "worker_ids", worker_id(), status=TaskResultStatus.RUNNING.value,
                     started_at=_iso(started), last_attempted_at=_iso(started))  # fmt: skip
        result = build_result(task, self.jid, store.read(self.jid))
        task_started.send(sender=type(backend), task_result=result)
        call_args = (TaskContext(task_result=result), *args) if task.takes_context else args
        try:
            if iscoroutinefunction(task.func):
                # On this worker thread's own loop, as any async job runs, not on a fresh loop
                # in a helper thread per run (what Task.call does): a client bound to a loop
                # then serves every run of this thread.
                value = coroutines.run(task.acall(*call_args, **kwargs))
            else:
                value = task.call(*call_args, **kwargs)
            value = json.loads(wire.dumps(value))  # results must survive JSON, like the arguments
        except Exception as exc:
            error = {"exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
                     "traceback": "".join(traceback.format_exception(exc))}  # fmt: skip
            # READY again: the retry handler decides next whether it retries (READY) or dies
            # (the death handler below marks it FAILED).
            store.append(self.jid, "errors", error, status=TaskResultStatus.READY.value, finished_at="")
            raise
        finished = _now()
        store.write(self.jid, status=TaskResultStatus.SUCCESSFUL.value, finished_at=_iso(finished),
                    return_value=json.dumps(value))  # fmt: skip
        final = build_result(task, self.jid, store.read(self.jid))
        task_finished.send(sender=type(backend), task_result=final)
        return value


def task_died(payload: Payload, exc: BaseException) -> None:
    """Death handler: a task run that will not be retried is FAILED, and finished."""
    task = _tasks.get(str(payload.get("class")))
    jid = payload.get("jid")
    if task is None or not isinstance(jid, str):
        return
    backend = task.get_backend()
    if not isinstance(backend, WurkBackend):
        return
    backend.store.write(jid, status=TaskResultStatus.FAILED.value, finished_at=_iso(_now()))
    task_finished.send(sender=type(backend), task_result=build_result(task, jid, backend.store.read(jid)))


def build_result(task: Task[Any, Any], jid: str, data: dict[str, bytes]) -> TaskResult[Any, Any]:
    errors = [TaskError(**e) for e in json.loads(data.get("errors") or b"[]")]
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=jid,
        status=TaskResultStatus(data.get("status", b"READY").decode()),
        enqueued_at=_parse(data.get("enqueued_at")),
        started_at=_parse(data.get("started_at")),
        finished_at=_parse(data.get("finished_at")),
        last_attempted_at=_parse(data.get("last_attempted_at")),
        args=json.loads(data.get("args") or b"[]"),
        kwargs=json.loads(data.get("kwargs") or b"{}"),
        backend=task.backend,
        errors=errors,
        worker_ids=json.loads(data.get("worker_ids") or b"[]"),
    )
    if "return_value" in data:
        object.__setattr__(result, "_return_value", json.loads(data["return_value"]))
    return result


class WurkBackend(BaseTaskBackend):
    task_class = WurkTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.store = ResultStore(int(self.options.get("RESULT_TTL", DEFAULT_RESULT_TTL)))
        self.on_commit = bool(self.options.get("ON_COMMIT", True))
        self.defaults = {k.lower(): v for k, v in self.options.items() if k.lower() in SIDEKIQ_OPTIONS}
        if task_died not in wurk.death_handlers:
            wurk.death_handlers.append(task_died)

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        self.validate_task(task)
        register_task(task)
        options = dict(self.defaults)
        options.update({k: getattr(task, k) for k in SIDEKIQ_OPTIONS if getattr(task, k, None) is not None})
        options["queue"] = task.queue_name
        if task.priority:
            options["priority"] = task.priority
        if not self.on_commit:
            options["on_commit"] = False
        setter: Setter[...] = Setter(registry.resolve(task.module_path) or TaskJob, options)
        payload = setter.payload(list(args), dict(kwargs))
        jid = payload["jid"] = wire.new_jid()
        enqueued = _now()
        record = {
            "status": TaskResultStatus.READY.value,
            "enqueued_at": _iso(enqueued),
            "task": task.module_path,
            "args": list(args),
            "kwargs": dict(kwargs),
        }
        app = app_settings()
        alias = active_alias(app.database) if self.on_commit and app.enqueue != "immediate" else None
        if alias is not None:
            # The record follows the push: written at commit (just before it), never on rollback.
            transaction.on_commit(functools.partial(self.store.write, jid, **record), using=alias)
        else:
            self.store.write(jid, **record)
        at = task.run_after.timestamp() if task.run_after is not None else None
        due = at if at and at > enqueued.timestamp() else None
        wurk.client.push(payload, at=due, delivery=setter.delivery)
        # Built from what was written, not read back: a fast worker may already have moved on.
        result = build_result(task, jid, {k: v.encode() if isinstance(v, str) else json.dumps(v).encode()
                                          for k, v in record.items()})  # fmt: skip
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        data = self.store.read(result_id)
        if not data:
            raise TaskResultDoesNotExist(result_id)
        task = _tasks.get(data.get("task", b"").decode())
        if task is None:
            raise TaskResultDoesNotExist(f"{result_id}: its task is not loaded in this process")
        return build_result(task, result_id, data)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        from django_wurk.conf import build_config
        from django_wurk.core.config import ConfigError

        messages = list(super().check(**kwargs))
        try:
            listened = set(build_config().queue_names)
        except ConfigError:
            return messages  # reported by django_wurk.E001
        for queue in sorted(self.queues - listened):
            messages.append(
                checks.Info(
                    f"TASKS[{self.alias!r}] may enqueue onto queue {queue!r}, "
                    "which WURK['QUEUES'] does not list",
                    hint="Start a worker for it (runwurk -q NAME) or add it to WURK['QUEUES'].",
                    id="django_wurk.I001",
                )
            )
        return messages
