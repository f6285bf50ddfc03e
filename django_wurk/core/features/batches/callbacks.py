"""Batch callbacks: the classes a user writes, and the job that runs them.

A callback is a ``BatchCallback`` subclass, registered when it is defined under its dotted
path (``pkg.mod.ImportDone``), exactly as jobs are. Redis only ever names a registered
class: a target read from Redis is looked up here and never imported, so whoever can
write to Redis cannot make a worker import or call arbitrary code. A target nobody
registered sends its callback job to the dead set with the reason (it cannot succeed by
retrying); a callback that raises is retried like any job.
"""

from __future__ import annotations

import re
import threading
from typing import Any, ClassVar

from django_wurk.core.features.batches import keys
from django_wurk.core.features.batches.script import CALLBACK_JOB
from django_wurk.core.features.batches.status import EVENTS, BatchStatus
from django_wurk.core.job import Job

#: ``pkg.mod.Class`` or ``pkg.mod.Class#method`` (no private methods).
TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(#[A-Za-z][A-Za-z0-9_]*)?\Z")


class UnknownBatchCallback(LookupError):
    """A callback names no registered ``BatchCallback`` (or a method it does not have)."""


_registry: dict[str, type[BatchCallback]] = {}
_lock = threading.Lock()


class BatchCallback:
    """Base class of batch callbacks; define ``on_complete``, ``on_success`` and/or ``on_death``.

    Each is called as ``method(status, options)`` on a fresh instance, in a worker, as a job
    of the batch's callback queue (with retries). ``options`` is what was given to
    ``Batch.on()``, after a JSON round trip.
    """

    #: The name callbacks are stored under: the class's dotted path.
    callback_name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "<locals>" in cls.__qualname__:
            raise ValueError(
                f"BatchCallback {cls.__qualname__} is defined inside a function; define it at "
                "module level so a worker can find it"
            )
        cls.callback_name = f"{cls.__module__}.{cls.__qualname__}"
        with _lock:
            _registry[cls.callback_name] = cls


def resolve_class(name: str) -> type[BatchCallback] | None:
    return _registry.get(name)


def method_name(target: str, event: str) -> str:
    _, _, method = target.partition("#")
    return method or f"on_{event}"


def target_name(target: Any, event: str) -> str:
    """The stored form of a callback target; ``ValueError`` for anything that could never run."""
    if isinstance(target, type):
        if not issubclass(target, BatchCallback) or target is BatchCallback:
            raise ValueError(f"a batch callback must be a BatchCallback subclass, got {target!r}")
        name = target.callback_name
    elif isinstance(target, str):
        name = target
    else:
        raise ValueError(f"a batch callback is a BatchCallback subclass or its dotted path, got {target!r}")
    if not TARGET.match(name):
        raise ValueError(
            f"batch callback target {name!r} must be 'pkg.module.Class' or 'pkg.module.Class#method'"
        )
    cls = resolve_class(name.partition("#")[0])
    method = method_name(name, event)
    if cls is not None and not callable(getattr(cls, method, None)):
        raise ValueError(f"{cls.callback_name} has no method {method}() to call on {event!r}")
    return name


def run_callback(bid: str, entry: Any) -> None:
    if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry[:2])):
        raise UnknownBatchCallback(f"malformed batch callback entry {entry!r}")
    event, target, options = entry
    if not isinstance(bid, str) or not keys.BID.match(bid):
        raise UnknownBatchCallback(f"malformed batch id {bid!r}")
    if event not in EVENTS or not TARGET.match(target):
        raise UnknownBatchCallback(f"malformed batch callback {target!r} for event {event!r}")
    class_name = target.partition("#")[0]
    cls = resolve_class(class_name)
    if cls is None:
        raise UnknownBatchCallback(
            f"no BatchCallback is registered as {class_name!r}; define it in a module the worker "
            "imports (an installed app's jobs module); callbacks are never imported by name from Redis"
        )
    method = getattr(cls(), method_name(target, event), None)
    if not callable(method):
        raise UnknownBatchCallback(f"{class_name} has no method {method_name(target, event)}()")
    method(BatchStatus(bid), options)


class CallbackJob(Job):
    """Runs one callback of one batch: ``args = [bid, [event, target, options]]``."""

    wire_name = CALLBACK_JOB

    def perform(self, bid: str, entry: Any) -> None:
        run_callback(bid, entry)

    def retry_in(self, count: int, exc: BaseException) -> int | float | str | None:
        # Retrying cannot make an unknown class known: straight to the dead set, with the reason.
        return "kill" if isinstance(exc, UnknownBatchCallback) else None
