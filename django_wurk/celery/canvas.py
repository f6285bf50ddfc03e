"""Signatures: a task call written down, to be sent later (``add.s(2, 2)``, ``signature("proj.add")``).

A ``Signature`` is a dict, as in Celery (``task``, ``args``, ``kwargs``, ``options``,
``immutable``, ``subtask_type``), so it is JSON and can ride in a payload as an argument;
``signature(d)`` turns such a dict back into one. Arguments are kept in kombu's JSON when
the signature is serialised, like any task argument.

``chain``, ``group`` and ``chord`` (on batches) are not in this version (see docs/celery.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django_wurk.celery.results import AsyncResult


class Signature(dict[str, Any]):
    def __init__(
        self,
        task: str | Mapping[str, Any],
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        immutable: bool = False,
        subtask_type: str | None = None,
        **extra_options: Any,
    ) -> None:
        if isinstance(task, Mapping):
            data = dict(task)
            task = data.get("task", "")
            args, kwargs = data.get("args"), data.get("kwargs")
            options, immutable = data.get("options"), bool(data.get("immutable", False))
            subtask_type = data.get("subtask_type")
        if not isinstance(task, str) or not task:
            raise ValueError(f"a signature needs a task name, got {task!r}")
        super().__init__(
            task=task,
            args=list(args or ()),
            kwargs=dict(kwargs or {}),
            options={**dict(options or {}), **extra_options},
            subtask_type=subtask_type,
            immutable=immutable,
        )

    @property
    def task(self) -> str:
        return str(self["task"])

    @property
    def name(self) -> str:
        return self.task

    @property
    def args(self) -> list[Any]:
        return list(self["args"])

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self["kwargs"])

    @property
    def options(self) -> dict[str, Any]:
        return dict(self["options"])

    @property
    def immutable(self) -> bool:
        return bool(self["immutable"])

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Signature:  # fmt: skip
        """A copy with ``args`` put before its own (unless immutable) and ``kwargs``/``options`` merged."""
        new_args, new_kwargs = self.args, self.kwargs
        if not self.immutable:
            new_args = [*(args or ()), *new_args]
            new_kwargs = {**new_kwargs, **dict(kwargs or {})}
        return Signature(self.task, new_args, new_kwargs, {**self.options, **options}, self.immutable,
                         self["subtask_type"])  # fmt: skip

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        """Change this signature's options in place (``queue=``, ``countdown=``...), as Celery's."""
        if immutable is not None:
            self["immutable"] = immutable
        self["options"] = {**self.options, **options}
        return self

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult:  # fmt: skip
        from django_wurk.celery.task import default_app, lookup

        sig = self.clone(args, kwargs, **options)
        task = lookup(sig.task)
        if task is None:
            return default_app.send_task(sig.task, sig.args, sig.kwargs, **sig.options)
        return task.apply_async(sig.args, sig.kwargs, **sig.options)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now (Celery: calling a signature calls the task)."""
        from django_wurk.celery.task import lookup

        task = lookup(self.task)
        if task is None:
            raise LookupError(f"no task named {self.task!r} is defined in this process")
        sig = self.clone(args, kwargs)
        return task(*sig.args, **sig.kwargs)

    def __repr__(self) -> str:
        args = ", ".join(
            [*(repr(a) for a in self["args"]), *(f"{k}={v!r}" for k, v in self["kwargs"].items())]
        )
        return f"{self.task}({args}){'!' if self.immutable else ''}"


def signature(varies: str | Mapping[str, Any], *args: Any, **kwargs: Any) -> Signature:
    """``signature("proj.add", args=(2, 2))``, or a signature back from its dict form."""
    if isinstance(varies, Signature):
        return varies.clone()
    return Signature(varies, *args, **kwargs)


subtask = signature
