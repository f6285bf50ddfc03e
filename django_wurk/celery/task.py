"""Celery's task API (``@shared_task``, ``@app.task``, ``delay``, ``apply_async``, ``self.retry``)
over wurk jobs.

A ``Task`` is what the decorator returns, as in Celery: calling it runs the function here;
``delay``/``apply_async`` push a Sidekiq job (see ``django_wurk.celery.job`` for the job and
``docs/migrate-from-celery.md`` for the payload). Tasks are kept by their Celery name, which
``lookup(name)`` answers, so a Celery message naming a task can be turned into a call.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import random
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django_wurk.celery import canvas, codec, dispatch, limits, options, routes, schedules, states
from django_wurk.celery.control import Control
from django_wurk.celery.exceptions import (
    ImproperlyConfigured,
    MaxRetriesExceededError,
    NotRegistered,
    Retry,
)
from django_wurk.celery.job import FEATURE as revoked
from django_wurk.celery.job import CeleryJob
from django_wurk.celery.results import DEFAULT_EXPIRES, AsyncResult, ResultStore
from django_wurk.core import wire
from django_wurk.core.config import QUEUE_NAME
from django_wurk.core.engine import wurk
from django_wurk.core.features.expiring import EXPIRES_AT
from django_wurk.core.features.limiters import Limiter
from django_wurk.core.features.timeouts import SOFT_TIMEOUT, TIMEOUT
from django_wurk.core.job import Setter, delivery_options
from django_wurk.core.priority import check as check_priority

logger = logging.getLogger("django_wurk.celery")

#: The payload key holding an absolute expiry (epoch seconds): Sidekiq Pro's ``expires_at``,
#: which the expiring-jobs feature checks before each run (it skips the job; the Celery
#: layer's middleware records REVOKED first, ``django_wurk.celery.job.RecordRevoked``).
EXPIRY_KEY = EXPIRES_AT
#: Set in the payload when one call asked for ``ignore_result=True``.
IGNORE_RESULT_KEY = "ignore_result"

#: Tasks by Celery name.
_tasks: dict[str, Task] = {}
_tasks_lock = threading.Lock()


def lookup(name: str) -> Task | None:
    """The task registered under the Celery name ``name`` (``module.function``, or its ``name=``)."""
    return _tasks.get(name)


def registered() -> list[str]:
    return sorted(_tasks)


# The app and its configuration ---------------------------------------------------------


class Settings(dict[str, Any]):
    """Celery's ``app.conf``: the few keys this layer reads, by attribute or by item."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


DEFAULTS: dict[str, Any] = {
    "result_expires": DEFAULT_EXPIRES,
    "task_default_queue": "default",
    "task_ignore_result": False,
    "task_track_started": False,
    "task_always_eager": False,
    "task_eager_propagates": False,
    "beat_schedule": {},
    "timezone": "UTC",
    "task_routes": None,
    "task_time_limit": None,
    "task_soft_time_limit": None,
}


class Celery:
    """Celery's app object, for projects that define tasks with ``@app.task``.

    ``broker`` and ``backend`` are accepted and unused: jobs and results live in the Redis
    ``WURK`` names. ``config_from_object("django.conf:settings", namespace="CELERY")``
    reads ``CELERY_RESULT_EXPIRES``, ``CELERY_TASK_DEFAULT_QUEUE``... when first needed.
    """

    def __init__(self, main: str | None = None, *, broker: Any = None, backend: Any = None, **kwargs: Any):
        self.main = main
        self.conf = Settings(DEFAULTS)
        self.conf.update({k: v for k, v in kwargs.items() if k in DEFAULTS})
        self._sources: list[tuple[Any, str | None]] = []
        self._autodiscover: list[tuple[Sequence[str] | None, str]] = []

    def config_from_object(self, obj: Any, namespace: str | None = None, **_ignored: Any) -> None:
        """Read settings from ``obj`` (an object, or ``"module:attribute"`` text) when first used."""
        self._sources.append((obj, namespace))

    def _load(self) -> None:
        while self._sources:
            obj, namespace = self._sources.pop(0)
            if isinstance(obj, str):
                import importlib

                module, _, attr = obj.partition(":")
                obj = importlib.import_module(module)
                if attr:
                    obj = getattr(obj, attr)
            prefix = f"{namespace}_" if namespace else ""
            for key in DEFAULTS:
                name = prefix + key.upper() if namespace else key
                if hasattr(obj, name):
                    self.conf[key] = getattr(obj, name)

    def setting(self, key: str) -> Any:
        self._load()
        return self.conf.get(key, DEFAULTS.get(key))

    def task(self, *args: Any, **opts: Any) -> Any:
        """``@app.task`` or ``@app.task(bind=True, ...)``: as ``shared_task``, on this app."""
        return _decorator(self, args, opts)

    def autodiscover_tasks(
        self,
        packages: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        related_name: str = "tasks",
        force: bool = False,
    ) -> None:
        """Import ``<package>.<related_name>`` for each package; with none, for each installed
        Django app, which the Django app of django-wurk does when it is ready."""
        if callable(packages):
            packages = packages()
        if packages is None:
            if _discoverer is not None:
                _discoverer(related_name)
            else:
                autodiscovery.append(related_name)
            return
        import importlib

        for package in packages:
            try:
                importlib.import_module(f"{package}.{related_name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{related_name}":
                    raise

    def send_task(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **opts: Any,
    ) -> AsyncResult:
        """Send by name; the task need not be defined in this process, only in the worker's."""
        task = lookup(name) or Task(None, self, name=name, registered=False)
        return task.apply_async(args, kwargs, **opts)

    def periodic_entries(self) -> schedules.BeatImport:
        """This app's ``beat_schedule`` (``CELERY_BEAT_SCHEDULE``) as periodic-job entries."""
        return schedules.periodic_entries(self.setting("beat_schedule") or {}, self.setting("timezone"))

    def AsyncResult(self, id: str) -> AsyncResult:
        return AsyncResult(id)

    @property
    def control(self) -> Control:
        """``app.control.revoke(task_id, terminate=...)``: a cancel (``django_wurk.celery.control``)."""
        return Control(self)

    @property
    def tasks(self) -> dict[str, Task]:
        return dict(_tasks)

    def __repr__(self) -> str:
        return f"<Celery {self.main or '__main__'}>"


#: Related module names to import from every installed Django app, once Django is ready.
autodiscovery: list[str] = []
_discoverer: Callable[[str], object] | None = None


def set_discoverer(discover: Callable[[str], object]) -> None:
    """Called by the Django app when ready: imports ``<app>.<name>`` for every installed app."""
    global _discoverer
    _discoverer = discover
    while autodiscovery:
        discover(autodiscovery.pop(0))


#: The app ``@shared_task`` tasks use.
default_app = Celery("default")


def current_app() -> Celery:
    return default_app


# The task ---------------------------------------------------------------------------------


@dataclass
class Request:
    """``self.request`` inside a bound task: this run's id, retry count and arguments."""

    id: str | None = None
    task: str | None = None
    retries: int = 0
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    eta: str | None = None
    expires: str | None = None
    delivery_info: dict[str, Any] = field(default_factory=dict)
    hostname: str | None = None
    is_eager: bool = False
    called_directly: bool = True
    ignore_result: bool = False
    root_id: str | None = None
    parent_id: str | None = None
    group: str | None = None
    chord: Any = None
    correlation_id: str | None = None
    reply_to: str | None = None
    timelimit: tuple[Any, Any] = (None, None)
    headers: dict[str, Any] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


#: Set while ``apply()`` runs a task in this thread: Celery keeps no result for an eager run
#: (``EagerResult`` holds it), so none is written, and no Redis is needed for one.
_eager: contextvars.ContextVar[bool] = contextvars.ContextVar("wurk_celery_eager", default=False)
_running: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "django_wurk_celery_request", default=None
)

#: Task options given as decorator arguments; their defaults are ``Task``'s class attributes.
TASK_OPTIONS = (
    "bind", "max_retries", "default_retry_delay", "autoretry_for", "dont_autoretry_for", "retry_kwargs",
    "retry_backoff", "retry_backoff_max", "retry_jitter", "ignore_result", "track_started", "queue",
    "expires", "serializer", "rate_limit", "time_limit", "soft_time_limit", "typing",
    "store_errors_even_if_ignored", "priority",
)  # fmt: skip
#: Task options accepted with no effect (why: options.UNSUPPORTED), warned about at definition.
TASK_UNSUPPORTED: tuple[str, ...] = ()
#: Task options refused at definition unless their value is what happens here anyway
#: (why: options.REFUSED); a ``base=`` class's attribute is checked too.
TASK_REFUSED = (
    "acks_late", "reject_on_worker_lost", "acks_on_failure_or_timeout", "retry_on_worker_lost",
    "acks_on_failure", "acks_on_timeout", "throws", "resultrepr_maxsize", "store_eager_result", "pydantic",
    "backend",
)  # fmt: skip
#: Call options an eager run (``task_always_eager``) takes without pushing: the callbacks run;
#: time limits, like Celery's, apply only on a worker; the rest say how to push.
EAGER_KNOWN = frozenset(
    {"link", "link_error", "time_limit", "soft_time_limit", "ignore_result", "retries", "serializer", "chain",
     "_on_commit", "_chain"}
)  # fmt: skip
TASK_IGNORED = (
    "trail",
    "send_events",
    "lazy",
    "shared",
    "autoregister",
)


def backoff_delay(factor: float, retries: int, maximum: float, full_jitter: bool) -> float:
    """Celery's ``retry_backoff``: ``factor * 2**retries`` capped at ``maximum``, then (with
    ``retry_jitter``) a random whole number of seconds between 0 and that."""
    countdown = min(maximum, factor * 2 ** min(retries, 64))
    if full_jitter:
        countdown = random.randrange(int(countdown) + 1)
    return max(0.0, float(countdown))


class Task:
    """A Celery task: call it to run the function here, ``delay()`` to run it on a worker."""

    # Options, with Celery's defaults; a ``base=`` subclass may set them as class attributes.
    name: str | None = None
    bind: bool = False
    max_retries: int | None = 3
    default_retry_delay: float = 180
    autoretry_for: tuple[type[BaseException], ...] = ()
    dont_autoretry_for: tuple[type[BaseException], ...] = ()
    retry_kwargs: Mapping[str, Any] = {}
    retry_backoff: bool | float = False
    retry_backoff_max: float = 600
    retry_jitter: bool = True
    #: None: the app's ``task_ignore_result`` (and ``task_track_started``, ``task_default_queue``).
    ignore_result: bool | None = None
    track_started: bool | None = None
    queue: str | None = None
    #: The default priority of its runs inside their queue (higher first; docs/priority.md).
    priority: int | None = None
    expires: float | datetime | str | None = None
    serializer: str = "json"
    #: Celery's ``"10/s"``, ``"100/m"``, ``"1000/h"``: a limiter shared by every worker (``limits``).
    rate_limit: str | float | None = None
    #: Seconds; None: the app's ``task_time_limit``/``task_soft_time_limit`` (None: no limit).
    time_limit: float | None = None
    soft_time_limit: float | None = None
    #: Check a call's arguments against the function's signature when it is sent (Celery's
    #: ``typing``, on by default as ``app.strict_typing`` is): a mismatch is a TypeError at once.
    typing: bool = True
    #: Write a FAILURE record even when results are ignored.
    store_errors_even_if_ignored: bool = False
    #: Only True: reliable fetch acknowledges a job only once its outcome is recorded.
    acks_late: bool = True

    def __init__(
        self, fn: Callable[..., Any] | None, app: Celery, *, name: str | None = None, registered: bool = True,
        **opts: Any,
    ) -> None:  # fmt: skip
        self.app = app
        self.run_function = fn
        if name is None and fn is not None:
            name = type(self).name or f"{fn.__module__}.{fn.__qualname__}"
        if not isinstance(name, str) or not name:
            raise ImproperlyConfigured(f"a task needs a name, got {name!r}")
        self.name = name
        where = f"task {name}"
        for key in TASK_OPTIONS:
            if key in opts:
                setattr(self, key, opts.pop(key))
        for key in TASK_UNSUPPORTED:
            if opts.pop(key, None) is not None:
                options.warn_unsupported(key, where, stacklevel=5)
        for key in TASK_REFUSED:
            options.refuse(key, opts.pop(key, getattr(type(self), key, None)), where)
        for key in TASK_IGNORED:
            opts.pop(key, None)
        opts.pop("base", None)
        if opts:
            raise TypeError(f"{where}: unknown task option(s) {sorted(opts)}")
        if self.serializer != "json":
            raise ImproperlyConfigured(
                f"{where}: serializer must be 'json' (jobs are JSON), got {self.serializer!r}"
            )
        if self.priority is not None:
            try:
                check_priority(self.priority, where)
            except ValueError as exc:
                raise ImproperlyConfigured(str(exc)) from None
        if self.queue is not None and (not isinstance(self.queue, str) or not QUEUE_NAME.match(self.queue)):
            raise ImproperlyConfigured(
                f"{where}: queue {self.queue!r} must be a name matching [a-zA-Z0-9_:.-]+"
            )
        hard, soft = (
            limits.limit_seconds(getattr(self, k), k, where) for k in ("time_limit", "soft_time_limit")
        )
        if hard is not None and soft is not None and soft > hard:
            raise ImproperlyConfigured(f"{where}: soft_time_limit must be less than or equal to time_limit")
        #: The task's ``rate_limit`` as a limiter (None without one), checked at definition.
        self.limiter: Limiter | None = limits.rate_limiter(name, self.rate_limit, where)
        self.autoretry_for = tuple(self.autoretry_for or ())
        self.dont_autoretry_for = tuple(self.dont_autoretry_for or ())
        self._setters: dict[tuple[str, bool], Setter[...]] = {}
        self._parameters: inspect.Signature | None = None
        if fn is not None:
            functools.update_wrapper(self, fn)
        self.job_class: type[CeleryJob] = type(
            name.rsplit(".", 1)[-1] if name.rsplit(".", 1)[-1].isidentifier() else "CeleryTask",
            (CeleryJob,),
            {
                "wire_name": name,
                "task": self,
                "__module__": fn.__module__ if fn is not None else __name__,
                "__qualname__": fn.__qualname__ if fn is not None else name,
            },
        ) if registered else _unregistered_job(name)  # fmt: skip
        if registered:
            # The engine that runs Celery tasks records a revoked one: the first task brings it.
            if wurk.feature(revoked.name) is None:
                wurk.use(revoked)
            with _tasks_lock:
                _tasks[name] = self

    # Calling it here ---------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        fn = self.run_function
        if fn is None:
            raise NotRegistered(self.name)
        return fn(self, *args, **kwargs) if self.bind else fn(*args, **kwargs)

    @property
    def request(self) -> Request:
        running = _running.get()
        if running is not None and running.task == self.name:
            return running
        return Request(task=self.name)

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"

    # Enqueueing -------------------------------------------------------------------------

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        task_id: str | None = None,
        countdown: float | None = None,
        eta: datetime | str | None = None,
        expires: float | datetime | str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        **opts: Any,
    ) -> AsyncResult:
        """Push one run; returns its ``AsyncResult`` at once (inside ``transaction.atomic()``
        the push waits for the commit, and the id is already known)."""
        where = f"{self.name}.apply_async()"
        self._check_arguments(args, kwargs, where)
        if self.app.setting("task_always_eager"):
            for key, value in opts.items():  # refused in an eager run as in a pushed one
                if key not in EAGER_KNOWN and key not in options.IGNORED:
                    options.refuse(key, value, where)
            return self.apply(args, kwargs, task_id=task_id, link=opts.get("link"),
                              link_error=opts.get("link_error"))  # fmt: skip
        if queue is None and self.queue is None:
            public = {k: v for k, v in opts.items() if not k.startswith("_")}
            route = routes.route(self.app.setting("task_routes"), str(self.name), args, kwargs, public, self)
            if route is not None:
                queue = route.get("queue")
                priority = route.get("priority") if priority is None else priority
        on_commit = opts.pop("_on_commit", None)
        hard, soft = self._time_limits(opts.pop("time_limit", None), opts.pop("soft_time_limit", None), where)
        try:
            link = canvas.callbacks(opts.pop("link", None), "link", where)
            link_error = canvas.callbacks(opts.pop("link_error", None), "link_error", where)
        except ValueError as exc:
            raise ImproperlyConfigured(str(exc)) from None
        rest_of_chain = opts.pop("_chain", None)
        celery_chain = opts.pop("chain", None)
        if celery_chain:
            # A Celery message's embedded chain keeps the next step last (Celery pops it).
            try:
                handed_over = canvas.from_celery_chain(celery_chain)
            except canvas.UnsupportedWorkflow as exc:
                raise canvas.UnsupportedWorkflow(f"{where}: chain= {exc}") from None
            rest_of_chain = [*handed_over, *(rest_of_chain or ())]
        ignore_result = opts.pop("ignore_result", None)
        retries = opts.pop("retries", None)
        serializer = opts.pop("serializer", "json")
        if serializer != "json":
            raise ImproperlyConfigured(f"{where}: serializer must be 'json', got {serializer!r}")
        for key in list(opts):
            if key in options.IGNORED:
                opts.pop(key)
            else:
                options.refuse(key, opts[key], where)
        jid = options.task_id(task_id) if task_id is not None else wire.new_jid()
        now = time.time()
        at = options.run_at(countdown, eta, now)
        expiry = options.expiry(expires if expires is not None else self.expires, now)
        queue = queue or self.queue or self.app.setting("task_default_queue")
        setter = self._setter(queue, on_commit)
        if kwargs and (not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs)):
            raise TypeError(f"{where}: kwargs must be a mapping with string keys, got {kwargs!r}")
        # Keyword arguments under the payload's ``kwargs`` key, as every job's (core/arguments.py).
        encoded_kwargs = codec.encode(dict(kwargs)) if kwargs else None
        payload = setter.payload(codec.encode(list(args or ())), encoded_kwargs)
        if expiry is not None:
            payload[EXPIRY_KEY] = expiry
        if ignore_result is not None:
            payload[IGNORE_RESULT_KEY] = bool(ignore_result)
        if priority is None:
            priority = self.priority
        if priority:  # Celery's AMQP sense, ours: higher runs first (docs/priority.md); 0 as before
            payload["priority"] = check_priority(priority, where)
        if rest_of_chain:
            payload[canvas.CHAIN_KEY] = codec.encode(list(rest_of_chain))
        if hard is not None:
            payload[TIMEOUT] = hard
        if soft is not None:
            payload[SOFT_TIMEOUT] = soft
        if link:
            payload[canvas.LINK_KEY] = codec.encode(link)
        if link_error:
            payload[canvas.LINK_ERROR_KEY] = codec.encode(link_error)
        if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
            payload["retry_count"] = retries - 1  # so request.retries reads ``retries`` again
        payload["jid"] = jid
        wurk.client.push(payload, at=at if at is not None and at > now else None, delivery=setter.delivery)
        return AsyncResult(jid, self.name)

    def _check_arguments(self, args: Any, kwargs: Any, where: str) -> None:
        """Celery's ``typing``: the call's arguments must fit the function, or TypeError now."""
        fn = self.run_function
        if not self.typing or fn is None:
            return
        if self._parameters is None:
            try:
                self._parameters = inspect.signature(fn)
            except (TypeError, ValueError):  # a builtin or C function: nothing to check against
                self.typing = False
                return
        leading = [self] if self.bind else []
        try:
            self._parameters.bind(*leading, *(args or ()), **dict(kwargs or {}))
        except TypeError as exc:
            raise TypeError(f"{where}: {exc} (the task's arguments are checked when it is sent)") from None

    def _time_limits(self, hard: Any, soft: Any, where: str) -> tuple[float | None, float | None]:
        """The call's limits, else the task's, else the app's (seconds, or None for none)."""
        if hard is None:
            hard = self.time_limit if self.time_limit is not None else self.app.setting("task_time_limit")
        if soft is None:
            soft = (
                self.soft_time_limit
                if self.soft_time_limit is not None
                else self.app.setting("task_soft_time_limit")
            )
        return limits.limit_seconds(hard, "time_limit", where), limits.limit_seconds(
            soft, "soft_time_limit", where
        )

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> AsyncResult:
        """Push when the open database transaction commits; unlike Celery's, returns the result."""
        return self.apply_async_on_commit(args, kwargs)

    def apply_async_on_commit(
        self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None, **opts: Any
    ) -> AsyncResult:
        return self.apply_async(args, kwargs, _on_commit=True, **opts)

    def _setter(self, queue: str, on_commit: bool | None) -> Setter[...]:
        key = (queue, bool(on_commit))
        setter = self._setters.get(key)
        if setter is None:
            opts: dict[str, Any] = {"queue": queue}
            if on_commit and "on_commit" in delivery_options():
                opts["on_commit"] = True
            setter = self._setters[key] = Setter(self.job_class, opts)
        return setter

    def signature(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                  **opts: Any) -> canvas.Signature:  # fmt: skip
        immutable = bool(opts.pop("immutable", False))
        return canvas.Signature(str(self.name), args, kwargs, opts, immutable=immutable)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> canvas.Signature:
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> canvas.Signature:
        return self.signature(args, kwargs, immutable=True)

    def AsyncResult(self, task_id: str) -> AsyncResult:
        return AsyncResult(task_id, self.name)

    def map(self, it: Any) -> canvas.xmap:
        """One task calling this one on each item, in the worker: its result is the list."""
        return canvas.xmap(self.s(), it)

    def starmap(self, it: Any) -> canvas.xstarmap:
        """One task calling this one with each item as its arguments."""
        return canvas.xstarmap(self.s(), it)

    def chunks(self, it: Any, n: int) -> canvas.chunks:
        """The items in parts of ``n``, each part a ``starmap`` task, sent as a group."""
        return canvas.chunks(self.s(), it, n)

    def apply(
        self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
        task_id: str | None = None, link: Any = None, link_error: Any = None, **_opts: Any,
    ) -> EagerResult:  # fmt: skip
        """Run now in this thread, through the same job and codec a worker uses (nothing pushed).

        As in Celery, ``link``/``link_error`` are called; time and rate limits are not applied
        to a run in the caller's thread."""
        where = f"{self.name}.apply()"
        try:
            links = codec.encode(canvas.callbacks(link, "link", where))
            errbacks = codec.encode(canvas.callbacks(link_error, "link_error", where))
        except ValueError as exc:
            raise ImproperlyConfigured(str(exc)) from None
        jid = options.task_id(task_id) if task_id is not None else wire.new_jid()
        payload = self._setter(self.queue or self.app.setting("task_default_queue"), None).payload(
            codec.encode(list(args or ())), codec.encode(dict(kwargs)) if kwargs else None
        )
        payload["jid"] = jid
        try:
            token = _eager.set(True)
            try:
                value = wurk.run_inline(payload)
            finally:
                _eager.reset(token)
        except Retry as exc:
            return EagerResult(jid, exc, states.RETRY)
        except Exception as exc:
            trace = "".join(traceback.format_exception(exc))
            request = Request(id=jid, task=self.name, args=list(args or ()), kwargs=dict(kwargs or {}),
                              is_eager=True, called_directly=False)  # fmt: skip
            canvas.call_errbacks(errbacks, request, exc, trace, jid)
            if self.app.setting("task_eager_propagates"):
                raise
            return EagerResult(jid, exc, states.FAILURE, trace)
        canvas.call_links(links, value)
        return EagerResult(jid, value, states.SUCCESS)

    # Inside a run --------------------------------------------------------------------------

    def retry(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: datetime | None = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **opts: Any,
    ) -> Retry:
        """End this run and run again later; ``MaxRetriesExceededError`` (or ``exc``) once
        ``max_retries`` retries have run. The arguments of the retry are this run's."""
        request = self.request
        if request.called_directly:
            raise exc if exc is not None else Retry("Task can be retried", None)
        where = f"{self.name}.retry()"
        if (args is not None and list(args) != list(request.args)) or (
            kwargs is not None and dict(kwargs) != dict(request.kwargs)
        ):
            raise ImproperlyConfigured(
                f"{where}: a retry runs with the same arguments (see docs/migrate-from-celery.md)"
            )
        if not throw:
            raise ImproperlyConfigured(f"{where}: throw=False is not supported; the retry is the exception")
        for key, value in opts.items():
            if value is not None:
                raise ImproperlyConfigured(
                    f"{where}: {key}= is not supported: a retry runs the job it was given again, "
                    "with the options it was sent with"
                )
        limit = self.max_retries if max_retries is None else max_retries
        if limit is not None and request.retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{request.args} kwargs:{request.kwargs}"
            )
        when: float | datetime
        if countdown is not None:
            when = options.seconds(countdown, "countdown")
        elif eta is not None:
            when = max(options.moment(eta, "eta") - time.time(), 0.0)
        else:
            when = float(self.default_retry_delay)
        raise Retry(exc=exc, when=when)

    def update_state(self, task_id: str | None = None, state: str | None = None, meta: Any = None,
                     **_ignored: Any) -> None:  # fmt: skip
        """Write a custom state (e.g. progress) into the result, as Celery does."""
        task_id = task_id or self.request.id
        if task_id and state:
            ResultStore().write(task_id, state, meta, expires=self.result_expires)

    # Hooks a base class may override, as in Celery ---------------------------------------------

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None: ...

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None: ...

    def on_retry(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None: ...

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None: ...

    def after_return(
        self, status: str, retval: Any, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None: ...

    # Run by the worker (CeleryJob.perform) -----------------------------------------------------

    @property
    def result_expires(self) -> int | None:
        value = self.app.setting("result_expires")
        if hasattr(value, "total_seconds"):
            value = value.total_seconds()
        return int(value) if value else None

    def ignores_result(self, payload: Mapping[str, Any]) -> bool:
        """The call's ``ignore_result`` if it gave one, else the task's, else the app's."""
        per_call = payload.get(IGNORE_RESULT_KEY)
        if per_call is not None:
            return per_call is True
        if self.ignore_result is not None:
            return bool(self.ignore_result)
        return bool(self.app.setting("task_ignore_result"))

    def record_revoked(self, task_id: str, payload: Mapping[str, Any], expired: bool = True) -> None:
        """The job expired before it ran (the expiring-jobs feature skips it), or was revoked
        (cancelled: ``expired=False``): say REVOKED."""
        if not self.ignores_result(payload):
            ResultStore(wurk).write(task_id, states.REVOKED, None, expires=self.result_expires)
        dispatch.task_revoked.send(
            sender=self, request=Request(id=task_id, task=self.name, called_directly=False),
            terminated=False, signum=None, expired=expired,
        )  # fmt: skip

    def execute(self, job: CeleryJob, args: list[Any], kw: dict[str, Any]) -> Any:
        """Run the task for ``job``; ``args`` and ``kw`` as the payload holds them (kombu's
        JSON envelopes still in), handed over by the engine, which checked ``kw`` is an object.

        With a ``rate_limit``, the run first takes its place in the task's window: past the
        wait, ``OverLimit`` leaves here, before anything is recorded, and the limiters'
        middleware puts the job back in the schedule."""
        if self.limiter is not None and not _eager.get():
            with self.limiter.within_limit():
                return self._execute(job, args, kw)
        return self._execute(job, args, kw)

    def _execute(self, job: CeleryJob, args: list[Any], kw: dict[str, Any]) -> Any:
        payload = job.payload
        args, kwargs = codec.decode(args), codec.decode(kw)
        count = payload.get("retry_count")
        retries = count + 1 if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
        eager = _eager.get()
        ignore = eager or self.ignores_result(payload)
        request = Request(
            id=job.jid, task=self.name, retries=retries, args=args, kwargs=kwargs,
            delivery_info={"routing_key": payload.get("queue"), "exchange": "", "priority": None,
                           "redelivered": None},
            hostname=socket.gethostname(), called_directly=False, ignore_result=ignore, is_eager=eager,
            expires=_iso(payload.get(EXPIRY_KEY)),
            timelimit=(payload.get(TIMEOUT), payload.get(SOFT_TIMEOUT)),
        )  # fmt: skip
        store = ResultStore(wurk)
        expires = self.result_expires
        token = _running.set(request)
        try:
            track = (
                self.track_started
                if self.track_started is not None
                else self.app.setting("task_track_started")
            )
            if track and not ignore:
                store.write(
                    job.jid, states.STARTED, {"pid": None, "hostname": request.hostname}, expires=expires
                )
            self._hook(self.before_start, job.jid, args, kwargs)
            dispatch.task_prerun.send(sender=self, task_id=job.jid, task=self, args=args, kwargs=kwargs)
            value = self._run_with_autoretry(args, kwargs)
        except Retry as exc:
            reason = exc.exc if exc.exc is not None else exc
            if not ignore:
                store.failure(job.jid, reason, states.RETRY, expires)
            self._hook(self.on_retry, reason, job.jid, args, kwargs, None)
            trace = "".join(traceback.format_exception(exc))
            dispatch.task_retry.send(sender=self, request=request, reason=reason, einfo=trace)
            self._postrun(job.jid, args, kwargs, reason, states.RETRY)
            raise
        except Exception as exc:
            if job.abandoned:
                raise  # the watchdog recorded this run's failure already (record_given_up)
            if not ignore or (self.store_errors_even_if_ignored and not eager):
                store.failure(job.jid, exc, states.FAILURE, expires)
            trace = "".join(traceback.format_exception(exc))
            self._hook(self.on_failure, exc, job.jid, args, kwargs, None)
            self._hook(self.after_return, states.FAILURE, exc, job.jid, args, kwargs, None)
            dispatch.task_failure.send(
                sender=self, task_id=job.jid, exception=exc, args=args, kwargs=kwargs, traceback=trace,
                einfo=trace,
            )  # fmt: skip
            self._postrun(job.jid, args, kwargs, exc, states.FAILURE)
            if payload.get(canvas.LINK_ERROR_KEY):
                canvas.call_errbacks(payload[canvas.LINK_ERROR_KEY], request, exc, trace, job.jid)
            raise
        finally:
            _running.reset(token)
        if job.abandoned:
            return value  # too late: it failed with TimeLimitExceeded, and says so
        if not ignore:
            store.success(job.jid, value, expires)
        self._hook(self.on_success, value, job.jid, args, kwargs)
        self._hook(self.after_return, states.SUCCESS, value, job.jid, args, kwargs, None)
        dispatch.task_success.send(sender=self, result=value)
        self._postrun(job.jid, args, kwargs, value, states.SUCCESS)
        if payload.get(canvas.CHAIN_KEY):
            canvas.continue_chain(payload[canvas.CHAIN_KEY], value)
        if payload.get(canvas.LINK_KEY):
            canvas.call_links(payload[canvas.LINK_KEY], value)
        return value

    def record_given_up(self, job: CeleryJob, failure: BaseException) -> None:
        """The run was failed without its thread (blocked past its ``time_limit``): what
        ``execute`` would have recorded for that failure, from the watchdog's thread."""
        payload = job.payload
        try:
            args, kwargs = codec.decode(payload.get("args") or []), codec.decode(payload.get("kwargs") or {})
        except Exception:  # kombu's decoder raises what its envelopes' constructors raise
            args, kwargs = [], {}
        trace = "".join(traceback.format_exception(failure))
        if not self.ignores_result(payload) or self.store_errors_even_if_ignored:
            ResultStore(wurk).failure(job.jid, failure, states.FAILURE, self.result_expires)
        self._hook(self.on_failure, failure, job.jid, args, kwargs, None)
        self._hook(self.after_return, states.FAILURE, failure, job.jid, args, kwargs, None)
        dispatch.task_failure.send(
            sender=self, task_id=job.jid, exception=failure, args=args, kwargs=kwargs, traceback=trace,
            einfo=trace,
        )  # fmt: skip
        self._postrun(job.jid, args, kwargs, failure, states.FAILURE)
        if payload.get(canvas.LINK_ERROR_KEY):
            request = Request(id=job.jid, task=self.name, args=args, kwargs=kwargs, called_directly=False)
            canvas.call_errbacks(payload[canvas.LINK_ERROR_KEY], request, failure, trace, job.jid)

    def _postrun(
        self, task_id: str, args: list[Any], kwargs: dict[str, Any], retval: Any, state: str
    ) -> None:
        dispatch.task_postrun.send(
            sender=self, task_id=task_id, task=self, args=args, kwargs=kwargs, retval=retval, state=state
        )

    def _run_with_autoretry(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if not self.autoretry_for:
            return self.run(*args, **kwargs)
        try:
            return self.run(*args, **kwargs)
        except Retry:
            raise
        except Exception as exc:
            if self.dont_autoretry_for and isinstance(exc, self.dont_autoretry_for):
                raise
            if not isinstance(exc, self.autoretry_for):
                raise
            retry_kwargs = dict(self.retry_kwargs or {})
            if self.retry_backoff:
                factor = 1.0 if self.retry_backoff is True else max(1.0, float(self.retry_backoff))
                retry_kwargs["countdown"] = backoff_delay(
                    factor, self.request.retries, float(self.retry_backoff_max), bool(self.retry_jitter)
                )
            raise self.retry(exc=exc, **retry_kwargs) from exc

    def _hook(self, hook: Callable[..., Any], *args: Any) -> None:
        try:
            hook(*args)
        except Exception:
            logger.exception("%s of task %s raised", getattr(hook, "__name__", "hook"), self.name)


def _iso(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value).astimezone().isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _unregistered_job(name: str) -> type[CeleryJob]:
    """A job class for ``send_task`` to a task this process does not define: never registered
    here (only its wire name is used), so it cannot run in this process."""

    class Remote(CeleryJob, abstract=True):
        wire_name = name

    return Remote


class EagerResult(AsyncResult):
    """What ``apply()`` returns: the outcome of a run in this thread, already known (not stored)."""

    def __init__(self, id: str, value: Any, state: str, traceback: str | None = None) -> None:
        super().__init__(id)
        self._outcome = value
        self._state = state
        self._traceback = traceback

    @property
    def state(self) -> str:
        return self._state

    @property
    def status(self) -> str:
        return self._state

    @property
    def result(self) -> Any:
        return self._outcome

    @property
    def traceback(self) -> str | None:
        return self._traceback

    def get(self, timeout: float | None = None, propagate: bool = True, *args: Any, **kwargs: Any) -> Any:
        if propagate and self._state in (states.FAILURE, states.RETRY):
            raise self._outcome
        return self._outcome

    wait = get


def _decorator(app: Celery, args: tuple[Any, ...], opts: dict[str, Any]) -> Any:
    def wrap(fn: Callable[..., Any]) -> Task:
        if "<locals>" in fn.__qualname__ and "name" not in opts:
            raise ImproperlyConfigured(
                f"{fn.__qualname__} is nested: give it name=... so a worker can find it by name"
            )
        base = opts.get("base") or Task
        if not (isinstance(base, type) and issubclass(base, Task)):
            raise ImproperlyConfigured(f"base={base!r} must be a subclass of django_wurk.celery.Task")
        return base(fn, app, **opts)

    if len(args) == 1 and callable(args[0]) and not opts:
        return wrap(args[0])
    if args:
        raise TypeError("use @shared_task or @shared_task(option=...), with keyword options only")
    return wrap


def _resolve(name: str, local: bool) -> Task | None:
    """The task named ``name``; unless ``local``, one that sends by name when none is defined here."""
    task = lookup(name)
    if task is None and not local:
        task = Task(None, default_app, name=name, registered=False)
    return task


canvas.set_resolver(_resolve)


def shared_task(*args: Any, **opts: Any) -> Any:
    """``@shared_task`` or ``@shared_task(bind=True, max_retries=5, ...)``: a task on the default app."""
    return _decorator(default_app, args, opts)


__all__ = ["Celery", "Request", "Task", "current_app", "lookup", "shared_task"]
