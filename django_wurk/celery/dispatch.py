"""Celery's task signals (``task_prerun``, ``task_success``...), sent by the Celery layer itself.

Celery's receivers take Celery's arguments (``task_id``, ``task``, ``retval``, ``einfo``...), which
``django_wurk.signals`` (a job's) do not carry, so the task signals are sent here, by
``Task.execute``, with Celery's names and arguments. This module imports nothing from Django,
like the rest of the layer; ``django_wurk.celery.signals`` is what a project imports.

A receiver that raises is logged and neither fails the task nor stops the others, as in Celery.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("django_wurk.celery")


class Signal:
    """Celery's ``Signal``: ``connect`` (also as a decorator, with or without ``sender=``),
    ``disconnect``, ``send``."""

    def __init__(self, name: str, providing_args: Any = None) -> None:
        self.name = name
        self._lock = threading.Lock()
        #: ``(key, sender, receiver or weak reference, weak)``.
        self._receivers: list[tuple[Any, Any, Any, bool]] = []

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        """``sig.connect(fn)``, ``@sig.connect``, or ``@sig.connect(sender=..., weak=..., dispatch_uid=)``."""
        if args and callable(args[0]):
            return self._connect(*args, **kwargs)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            return self._connect(fn, **kwargs)

        return decorate

    def _connect(self, receiver: Callable[..., Any], sender: Any = None, weak: bool = True,
                 dispatch_uid: Any = None) -> Callable[..., Any]:  # fmt: skip
        key = (dispatch_uid or _id(receiver), _id(sender))
        ref: Any = receiver
        if weak:
            ref = weakref.WeakMethod(receiver) if hasattr(receiver, "__self__") else weakref.ref(receiver)
        with self._lock:
            if not any(k == key for k, *_ in self._receivers):
                self._receivers.append((key, sender, ref, weak))
        return receiver

    def disconnect(self, receiver: Any = None, sender: Any = None, weak: bool = True,
                   dispatch_uid: Any = None) -> bool:  # fmt: skip
        key = (dispatch_uid or _id(receiver), _id(sender))
        with self._lock:
            before = len(self._receivers)
            self._receivers = [r for r in self._receivers if r[0] != key]
            return len(self._receivers) < before

    @property
    def receivers(self) -> list[Any]:
        return list(self._receivers)

    def _live(self, sender: Any) -> list[Callable[..., Any]]:
        out = []
        for _key, wanted, ref, weak in list(self._receivers):
            if wanted is not None and wanted is not sender and wanted != getattr(sender, "name", _NOTHING):
                continue
            receiver = ref() if weak else ref
            if receiver is not None:
                out.append(receiver)
        return out

    def send(self, sender: Any, **named: Any) -> list[tuple[Any, Any]]:
        """Call every receiver; one that raises is logged and its response is the exception."""
        if not self._receivers:
            return []
        responses: list[tuple[Any, Any]] = []
        for receiver in self._live(sender):
            try:
                responses.append((receiver, receiver(signal=self, sender=sender, **named)))
            except Exception as exc:
                logger.exception("signal %s: receiver %r raised", self.name, receiver)
                responses.append((receiver, exc))
        return responses

    send_robust = send

    def __repr__(self) -> str:
        return f"<Signal: {self.name}>"


_NOTHING = object()


def _id(target: Any) -> Any:
    if target is None or isinstance(target, str):
        return target
    if hasattr(target, "__func__"):
        return (id(target.__self__), id(target.__func__))
    return id(target)


task_prerun = Signal("task_prerun")
task_postrun = Signal("task_postrun")
task_success = Signal("task_success")
task_failure = Signal("task_failure")
task_retry = Signal("task_retry")
task_revoked = Signal("task_revoked")
