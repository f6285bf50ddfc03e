"""A job's call, checked against what its ``perform`` (or ``@job`` function) takes, at enqueue.

A Sidekiq job's arguments are only read when a worker runs it, so a missing or extra
argument is found minutes later, in the retry set, after the request that caused it has
returned. Checking the call against the job's signature when it is pushed turns that into
an exception in the code that made the call, naming the job and the argument, as calling
the function directly would. The type checkers do the same before the code runs (the
enqueue methods are typed with the job's ``ParamSpec``, ``core/job.py``); this check is
for the calls they cannot see (``Any`` values, ``**options`` dicts, untyped callers).

Keyword arguments travel under the payload key ``kwargs``, a JSON object beside ``args``
(the key ``django.tasks`` and the Celery layer already use): the positional ``args`` stay
what every Sidekiq reader expects, a Ruby worker ignores the extra key (and carries it
through its retry and dead sets unchanged), and Ruby code that wants them reads
``job["kwargs"]``. See docs/jobs.md, "Arguments".

The check is cheap on the common path (positional arguments within the counts the
signature allows: two comparisons); only a call with keyword arguments, or one that looks
wrong, goes through ``inspect.Signature.bind``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_wurk.core.wire import FLAT_TYPES, check_json_native

#: The payload key of a job's keyword arguments.
KWARGS_KEY = "kwargs"

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def keywords(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments a payload carries (none without the key).

    Raises ``ValueError`` for a ``kwargs`` that is not a JSON object: such a payload fails
    the same way on every run, so the worker buries it with this reason.
    """
    kwargs = payload.get(KWARGS_KEY)
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"the payload's {KWARGS_KEY!r} must be a JSON object of keyword arguments, "
                         f"got {type(kwargs).__name__}")  # fmt: skip
    return kwargs


class CallShape:
    """What one job's signature accepts, read once per class (enqueue is a hot path)."""

    __slots__ = ("fewest", "job", "most", "names", "needs_keywords", "signature")

    def __init__(self, job: str, target: Callable[..., Any] | None, *, method: bool = False) -> None:
        """``target`` is the function a worker calls (``None``: accept any call); a
        ``method`` is read without its ``self``."""
        self.job = job
        try:
            signature = inspect.signature(target) if target is not None else None
        except (TypeError, ValueError):  # a builtin or C callable with no readable signature
            signature = None
        params = list(signature.parameters.values()) if signature is not None else []
        if signature is not None and method:
            params = params[1:]
            signature = signature.replace(parameters=params)
        self.signature = signature
        positional = [p for p in params if p.kind in _POSITIONAL]
        #: Parameter names by position, to name a positional argument in an error.
        self.names = [p.name for p in positional]
        self.fewest = sum(1 for p in positional if p.default is p.empty)
        varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        self.most = math.inf if varargs or signature is None else len(positional)
        self.needs_keywords = any(
            p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty for p in params
        )

    def check(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None, json_native: bool) -> None:
        """Raise ``TypeError`` naming the job and the argument if this call could not run."""
        if self.signature is not None and (
            kwargs or self.needs_keywords or not self.fewest <= len(args) <= self.most
        ):
            try:
                self.signature.bind(*args, **(kwargs or {}))
            except TypeError as exc:
                raise TypeError(f"{self.job}: {exc}") from None
        if json_native:
            for value in args:
                if type(value) not in FLAT_TYPES:
                    self._check_json(args)
                    break
        # Keyword arguments are new to the wire, with no old callers to keep working:
        # checked whatever ``STRICT_ARGS`` says, as the django.tasks backend always did.
        if kwargs:
            for name, value in kwargs.items():
                check_json_native(value, f"{self.job}: argument {name!r}")

    def _check_json(self, args: Sequence[Any]) -> None:
        for i, value in enumerate(args):
            check_json_native(value, f"{self.job}: argument {self.name(i)}")

    def name(self, index: int) -> str:
        """``'user_id' (args[0])``, or ``args[3]`` for one caught by ``*args``."""
        if index < len(self.names):
            return f"{self.names[index]!r} (args[{index}])"
        return f"args[{index}]"
