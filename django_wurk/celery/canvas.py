"""Signatures: a task call written down, to be sent later (``add.s(2, 2)``, ``signature("proj.add")``).

A ``Signature`` is a dict, as in Celery (``task``, ``args``, ``kwargs``, ``options``,
``immutable``, ``subtask_type``), so it is JSON and can ride in a payload as an argument;
``signature(d)`` turns such a dict back into one. Arguments are kept in kombu's JSON when
the signature is serialised, like any task argument.

``chain`` carries its remaining steps in the job's payload; ``group`` is a batch; ``chord``
is a batch whose ``success`` callback calls the body with the header's results. ``link`` and
``link_error`` callbacks ride in the payload as a chain's rest does (``LINK_KEY``,
``LINK_ERROR_KEY``); ``map``, ``starmap`` and ``chunks`` are signatures of the built-in
``celery.map``/``celery.starmap`` tasks (``django_wurk.celery.builtins``), as in Celery.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from django_wurk.celery import codec
from django_wurk.celery import options as call_options
from django_wurk.celery.exceptions import ImproperlyConfigured
from django_wurk.celery.results import AsyncResult
from django_wurk.core import wire
from django_wurk.core.features.batches import BatchCallback

logger = logging.getLogger("django_wurk.celery")

#: ``(name, local) -> task``: the task a signature names. ``django_wurk.celery.task`` sets it
#: (it defines tasks, and builds signatures, so it sits above this module). With ``local``
#: False, a name this process does not define gives a task that only sends by name.
_resolve: Callable[[str, bool], Any] | None = None


def set_resolver(resolve: Callable[[str, bool], Any]) -> None:
    global _resolve
    _resolve = resolve


def _task(name: str, local: bool) -> Any:
    task = _resolve(name, local) if _resolve is not None else None
    if task is None:
        raise LookupError(f"no task named {name!r} is defined in this process")
    return task


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

    def link(self, callback: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call ``callback`` with this task's return value when it succeeds (Celery's ``link``)."""
        self["options"] = {**self.options, "link": [*_as_list(self.options.get("link")), callback]}
        return callback

    def link_error(self, errback: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call ``errback`` when this task fails (Celery's ``link_error``)."""
        self["options"] = {**self.options, "link_error": [*_as_list(self.options.get("link_error")), errback]}
        return errback

    def on_error(self, errback: Mapping[str, Any]) -> Signature:
        self.link_error(errback)
        return self

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult:  # fmt: skip
        sig = self.clone(args, kwargs, **options)
        result: AsyncResult = _task(sig.task, False).apply_async(sig.args, sig.kwargs, **sig.options)
        return result

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now (Celery: calling a signature calls the task)."""
        sig = self.clone(args, kwargs)
        return _task(sig.task, True)(*sig.args, **sig.kwargs)

    def __or__(self, other: Any) -> chain:  # type: ignore[override]
        """``a.s() | b.s()``: a chain (not a dict merge)."""
        return chain(self, other)

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


# Workflows: chain, group, chord ------------------------------------------------------------------

#: The payload key holding the rest of a chain (signatures in kombu JSON), as Celery's message
#: carries it: when the job succeeds, the first is called with its return value, given the rest.
CHAIN_KEY = "chain"


def _with_ids(sigs: Sequence[Signature]) -> list[Signature]:
    """Copies with a task id each, chosen now, so every result is addressable before anything runs."""
    out = []
    for sig in sigs:
        sig = signature(sig)
        if not sig.options.get("task_id"):
            sig.set(task_id=wire.new_jid())
        out.append(sig)
    return out


class chain:
    """``chain(a.s(1), b.s(), c.s())`` or ``a.s(1) | b.s() | c.s()``: each result feeds the next.

    The rest of the chain rides in the job's payload (``chain``); a step that fails or expires
    ends the chain, as in Celery. ``apply_async()`` returns the last step's ``AsyncResult``,
    whose ``parent`` is the step before it.
    """

    tasks: list[Signature]

    def __init__(self, *tasks: Any) -> None:
        flat: list[Any] = []
        for item in tasks:
            if isinstance(item, chain):
                flat.extend(item.tasks)
            elif isinstance(item, Mapping):
                flat.append(item)
            else:
                flat.extend(item)
        if not flat:
            raise ValueError("a chain needs at least one signature")
        for sig in flat:
            if not isinstance(sig, Mapping) or "task" not in sig:
                raise TypeError(f"a chain holds task signatures only (no group or chord inside), got {sig!r}")
        self.tasks = [signature(s) for s in flat]

    def __or__(self, other: Any) -> chain:
        return chain(self, other)

    def link(self, callback: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call ``callback`` with the chain's result (its last step's), as Celery's."""
        return self.tasks[-1].link(callback)

    def link_error(self, errback: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call ``errback`` when any step fails (the chain ends there), as Celery's."""
        for step in self.tasks:
            step.link_error(errback)
        return errback

    def on_error(self, errback: Mapping[str, Any]) -> chain:
        self.link_error(errback)
        return self

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult:  # fmt: skip
        steps = _with_ids(self.tasks)
        # As in Celery: the chain's callback follows its last step, its errback any step.
        for callback in _as_list(options.pop("link", None)):
            steps[-1].link(callback)
        for errback in _as_list(options.pop("link_error", None)):
            for step in steps:
                step.link_error(errback)
        first, rest = steps[0], steps[1:]
        _task(first.task, False).apply_async(
            *_call_args(first, args, kwargs), **{**first.options, **options}, _chain=list(rest)
        )
        result: AsyncResult | None = None
        for step in steps:
            current = AsyncResult(step.options["task_id"], step.task)
            current.parent = result
            result = current
        assert result is not None
        return result

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)


def _call_args(
    sig: Signature, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None
) -> tuple[Any, ...]:
    merged = sig.clone(args, kwargs)
    return (merged.args, merged.kwargs)


class UnsupportedWorkflow(ValueError):
    """A Celery message's embedded chain holds something this layer cannot carry on."""


#: The options of a Celery chain step that say how to call it; the rest of what Celery keeps
#: there (``reply_to``, ``root_id``, ``parent_id``, ``group_id``, stamps, ``priority``) is its
#: own bookkeeping or has no effect here, and is dropped at the handover.
CELERY_STEP_OPTIONS = (
    "task_id", "countdown", "eta", "expires", "queue", "ignore_result", "time_limit", "soft_time_limit",
)  # fmt: skip


def from_celery_chain(steps: Any) -> list[Signature]:
    """The rest of a chain as a Celery message embeds it (protocol 2 ``embed["chain"]``: the
    next step **last**, since Celery's worker pops it), as this layer's steps, next step first.

    Each step must be a plain task signature: a group or chord inside the chain, or a step with
    ``link``/``link_error`` callbacks, raises ``UnsupportedWorkflow``, because carrying the
    chain on without it would silently run only part of the workflow.
    """
    if not isinstance(steps, (list, tuple)):
        raise UnsupportedWorkflow(f"a Celery chain is a list of signatures, got {type(steps).__name__}")
    return [from_celery_signature(step, "chain step") for step in reversed(steps)]


def from_celery_callbacks(items: Any, what: str) -> list[Signature]:
    """A Celery message's ``callbacks`` or ``errbacks`` (its ``link``/``link_error``) as this
    layer's signatures, each a plain task signature, checked as a chain step is."""
    if not items:
        return []
    if not isinstance(items, (list, tuple)):
        raise UnsupportedWorkflow(f"Celery {what} are a list of signatures, got {type(items).__name__}")
    return [from_celery_signature(item, what[:-1]) for item in items]


def from_celery_signature(step: Any, what: str) -> Signature:
    """One signature a Celery message embeds, keeping how to call it (``CELERY_STEP_OPTIONS``)."""
    if not isinstance(step, Mapping) or not isinstance(step.get("task"), str) or not step["task"]:
        raise UnsupportedWorkflow(f"a {what} is not a task signature: {step!r:.200}")
    kind = step.get("subtask_type")
    if kind:
        raise UnsupportedWorkflow(f"the {what} is a {kind} ({step['task']!r}), not a plain task")
    options = step.get("options") or {}
    if not isinstance(options, Mapping):
        raise UnsupportedWorkflow(f"{what} {step['task']!r}: options are not a mapping")
    callbacks = [name for name in ("link", "link_error", "chord") if options.get(name)]
    if callbacks:
        raise UnsupportedWorkflow(f"{what} {step['task']!r} carries {', '.join(callbacks)}")
    args, kwargs = step.get("args") or (), step.get("kwargs") or {}
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, Mapping):
        raise UnsupportedWorkflow(f"{what} {step['task']!r}: args or kwargs of the wrong type")
    kept = {key: options[key] for key in CELERY_STEP_OPTIONS if options.get(key) is not None}
    try:  # checked now, so a bad step is refused with its message, not met halfway through
        call_options.check_step(kept)
    except ValueError as exc:
        raise UnsupportedWorkflow(f"{what} {step['task']!r}: {exc}") from None
    return Signature(step["task"], args, kwargs, kept, immutable=bool(step.get("immutable")))


def continue_chain(rest: Any, value: Any) -> None:
    """Call the next step of a chain with ``value`` (run by the worker after a step succeeded).

    A rest that cannot be read or sent (another program's payload: not signatures, a bad
    task id or option) is logged and the chain stops there: the step itself has run. A push
    that cannot reach Redis raises, so the failure is recorded with the job.
    """
    try:
        steps = codec.decode(rest)
        if not isinstance(steps, list) or not steps:
            raise ValueError("not a list of signatures")
        nxt = Signature(steps[0])
        call = _call_args(nxt, (value,), None)
        _task(nxt.task, False).apply_async(*call, **nxt.options, _chain=steps[1:])
    except (ValueError, TypeError, LookupError, ImproperlyConfigured) as exc:
        logger.error(
            "the rest of a chain cannot be sent (%s: %s); the chain stops here", type(exc).__name__, exc
        )


# Callbacks: link and link_error ---------------------------------------------------------------

#: The payload keys holding a call's ``link`` and ``link_error`` signatures (kombu JSON).
LINK_KEY = "link"
LINK_ERROR_KEY = "link_error"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def callbacks(value: Any, name: str, where: str) -> list[Signature]:
    """A call's ``link``/``link_error`` (a signature or a list of them) as signatures; a
    ``ValueError`` naming the option for anything else (a task object, a function...)."""
    out = []
    for item in _as_list(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("task"), str):
            raise ValueError(
                f"{where}: {name} must be a signature or a list of signatures (task.s()), got {item!r}"
            )
        if item.get("subtask_type") == "chunks":
            raise ValueError(f"{where}: {name} cannot be a chunks signature; give it a task signature")
        out.append(signature(item))
    return out


def call_links(encoded: Any, value: Any) -> None:
    """Call each ``link`` signature with ``value`` (after the task succeeded), as a new task."""
    for sig in _decoded(encoded, LINK_KEY):
        try:
            _task(sig.task, False).apply_async(*_call_args(sig, (value,), None), **sig.options)
        except (ValueError, TypeError, LookupError, ImproperlyConfigured) as exc:
            logger.error("link %s cannot be sent (%s: %s)", sig.task, type(exc).__name__, exc)


def call_errbacks(encoded: Any, request: Any, exc: BaseException, trace: str, task_id: str) -> None:
    """Call each ``link_error`` signature once the task failed, as Celery 5 does: a task this
    process defines whose function takes more than one positional argument (and is not
    ``bind=True``) is called here, now, with ``(request, exc, traceback)``; any other is sent
    as a task with the failed task's id as its argument."""
    for sig in _decoded(encoded, LINK_ERROR_KEY):
        try:
            local = _resolve(sig.task, True) if _resolve is not None else None
            fn = getattr(local, "run_function", None)
            if fn is not None and not getattr(local, "bind", False) and _takes_more_than_one(fn):
                sig(request, exc, trace)
            else:
                _task(sig.task, False).apply_async(*_call_args(sig, (task_id,), None), **sig.options)
        except (ValueError, TypeError, LookupError, ImproperlyConfigured) as error:
            logger.error("link_error %s cannot be sent (%s: %s)", sig.task, type(error).__name__, error)
        except Exception:
            logger.exception("link_error %s raised", sig.task)


def _takes_more_than_one(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)) > 1


def _decoded(encoded: Any, key: str) -> list[Signature]:
    """The signatures a payload's ``link``/``link_error`` holds; another program's garbage is
    logged and skipped (the task itself has run)."""
    try:
        items = codec.decode(encoded)
    except Exception as exc:  # kombu's decoder raises what its envelopes' constructors raise
        logger.error("the %s of a task cannot be read (%s: %s)", key, type(exc).__name__, exc)
        return []
    out = []
    for item in items if isinstance(items, list) else [items]:
        try:
            if not isinstance(item, Mapping):
                raise TypeError(f"not a signature: {item!r:.100}")
            out.append(Signature(item))
        except (TypeError, ValueError) as exc:
            logger.error("a %s of a task cannot be read (%s: %s)", key, type(exc).__name__, exc)
    return out


# map, starmap, chunks -----------------------------------------------------------------------------


class xmap(Signature):
    """``task.map(it)``: one task that calls ``task`` on each item, in the worker (``celery.map``)."""

    subtask_name = "celery.map"

    def __init__(self, task: Mapping[str, Any], it: Iterable[Any], **options: Any) -> None:
        super().__init__(self.subtask_name, (), {"task": signature(task), "it": list(it)}, options,
                         subtask_type=type(self).__name__)  # fmt: skip


class xstarmap(xmap):
    """``task.starmap(it)``: one task that calls ``task(*item)`` on each item (``celery.starmap``)."""

    subtask_name = "celery.starmap"


def chunk_items(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
    items = iter(it)
    while part := list(itertools.islice(items, n)):
        yield part


class chunks(Signature):
    """``task.chunks(it, n)``: the items in parts of ``n``, each part one ``celery.starmap`` task,
    sent as a group; ``apply_async()`` returns its ``GroupResult`` (a list of lists)."""

    def __init__(self, task: Mapping[str, Any], it: Iterable[Any], n: int, **options: Any) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"chunks: n must be a whole number >= 1, got {n!r}")
        super().__init__("celery.chunks", (), {"task": signature(task), "it": list(it), "n": n}, options,
                         subtask_type="chunks")  # fmt: skip

    def group(self) -> _Group:
        kw = self.kwargs
        return group(*(xstarmap(kw["task"], part) for part in chunk_items(kw["it"], kw["n"])))

    def apply_async(  # type: ignore[override]  # a group's result, as Celery's chunks
        self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None, **options: Any
    ) -> GroupResult:
        return self.group().apply_async(args, kwargs, **{**self.options, **options})

    def delay(self, *args: Any, **kwargs: Any) -> GroupResult:  # type: ignore[override]
        return self.apply_async(args, kwargs)

    def __call__(self, **options: Any) -> GroupResult:
        return self.apply_async(**options)


class GroupResult:
    """The results of a group, in the order of its signatures; ``id`` is the batch's bid."""

    def __init__(self, id: str, results: Sequence[AsyncResult]) -> None:
        self.id = id
        self.results = list(results)

    def ready(self) -> bool:
        return all(r.ready() for r in self.results)

    def successful(self) -> bool:
        return all(r.successful() for r in self.results)

    def failed(self) -> bool:
        return any(r.failed() for r in self.results)

    def revoke(
        self, connection: Any = None, terminate: bool = False, signal: Any = None, **kwargs: Any
    ) -> None:
        """Cancel every task of the group (``django_wurk.celery.control``)."""
        from django_wurk.celery.control import revoke

        revoke([r.id for r in self.results], terminate=terminate, signal=signal)

    def completed_count(self) -> int:
        return sum(1 for r in self.results if r.successful())

    def waiting(self) -> bool:
        return not self.ready()

    def get(self, timeout: float | None = None, propagate: bool = True, **options: Any) -> list[Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        values = []
        for result in self.results:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            values.append(result.get(timeout=left, propagate=propagate, **options))
        return values

    join = get

    def __iter__(self) -> Iterator[AsyncResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self.results)}]>"


class group:
    """``group(a.s(1), a.s(2))``: run them in parallel, as one batch (shown on the Batches page)."""

    def __init__(self, *tasks: Signature | Sequence[Signature]) -> None:
        flat: list[Any] = []
        for item in tasks:
            flat.extend([item] if isinstance(item, Mapping) else item)
        for sig in flat:
            if not isinstance(sig, Mapping) or "task" not in sig:
                raise TypeError(f"a group holds task signatures only, got {sig!r}")
        self.tasks = [signature(s) for s in flat]

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> GroupResult:  # fmt: skip
        return self._push(args, kwargs, options, None)

    def delay(self, *args: Any, **kwargs: Any) -> GroupResult:
        return self.apply_async(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> GroupResult:
        return self.apply_async(args, kwargs)

    def _push(self, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None, options: Mapping[str, Any],
              body: Signature | None) -> GroupResult:  # fmt: skip
        from django_wurk.core.features.batches import Batch

        steps = _with_ids(self.tasks)
        batch = Batch(description=f"celery {'chord' if body else 'group'} of {len(steps)}", parent=None)
        if body is not None:
            batch.on(
                "success",
                ChordCallback,
                {"body": codec.encode(body), "ids": [s.options["task_id"] for s in steps]},
            )
        with batch.jobs():
            for step in steps:
                _task(step.task, False).apply_async(
                    *_call_args(step, args, kwargs), **{**step.options, **options}
                )
        return GroupResult(str(batch.bid), [AsyncResult(s.options["task_id"], s.task) for s in steps])


#: ``group`` under a name no method shadows (``chunks.group`` returns one).
_Group = group


class chord:
    """``chord(header)(body)``: run the header group, then ``body`` with the list of its results.

    The header is a batch and the body is pushed by its ``success`` callback, once every header
    task has succeeded. A header task that fails for good means the batch never succeeds: the
    body does not run (Celery would call it with a ``ChordError``); the batch's page shows the death.
    """

    def __init__(self, header: group | Sequence[Signature], body: Signature | None = None) -> None:
        self.header = header if isinstance(header, group) else group(*header)
        self.body = signature(body) if body is not None else None

    def __call__(self, body: Signature | None = None, **options: Any) -> AsyncResult:
        return self.apply_async(body=body, **options)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    body: Signature | None = None, **options: Any) -> AsyncResult:  # fmt: skip
        chosen = signature(body) if body is not None else self.body
        if chosen is None:
            raise ValueError("a chord needs a body: chord(header)(body)")
        [chosen] = _with_ids([chosen])
        # As in Celery: a chord's callbacks belong to its body, not to each header task.
        for callback in _as_list(options.pop("link", None)):
            chosen.link(callback)
        for errback in _as_list(options.pop("link_error", None)):
            chosen.link_error(errback)
        header = self.header._push(args, kwargs, options, chosen)
        result = AsyncResult(chosen.options["task_id"], chosen.task)
        result.parent = header
        return result


class ChordCallback(BatchCallback):
    """A chord's header batch succeeded: call its body with the header's results, in order."""

    def on_success(self, status: Any, options: dict[str, Any]) -> None:
        body = Signature(codec.decode(options["body"]))
        ids = options.get("ids")
        if not isinstance(ids, list):
            raise ValueError("chord callback without the header's task ids")
        values = [AsyncResult(str(i)).result for i in ids]
        # At least once, like every callback job: run twice, it pushes the body again, under
        # the same task id.
        _task(body.task, False).apply_async(*_call_args(body, (values,), None), **body.options)
