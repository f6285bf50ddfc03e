"""Jobs: what a user writes, and how it is enqueued.

A job is a ``Job`` subclass with a ``perform`` method, or a module-level function wrapped
by ``@job``. Its options mirror ``sidekiq_options`` and are validated when the class is
created, so a typo fails at import time rather than in production at enqueue time.
Options the engine does not know are carried in the payload unchanged, as Sidekiq does,
for middleware and Ruby processes to read.
"""

from __future__ import annotations

import functools
import inspect
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from django_wurk.core import priority
from django_wurk.core.arguments import KWARGS_KEY, CallShape
from django_wurk.core.config import QUEUE_NAME
from django_wurk.core.engine import wurk
from django_wurk.core.registry import registry
from django_wurk.core.wire import FLAT_TYPES, KNOWN_OPTIONS, RESERVED_KEYS, Payload, check_json_native

if TYPE_CHECKING:
    from django_wurk.core.features.batches import Batch

P = ParamSpec("P")
R = TypeVar("R")


class Performs(Protocol[P]):
    """A job class as the type checkers see it: the enqueue classmethods of ``Job`` take
    their parameters (``P``) from the subclass's ``perform``, so ``Welcome.perform_async("1")``
    is an error in the editor when ``perform`` takes ``user_id: int``."""

    def perform(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...


#: Checks one option's value, given where it was set (for the error), and returns it
#: normalised; raises ``ValueError`` for a value that could not be used.
DeliveryCheck = Callable[[Any, str], Any]


def check_shard(value: Any, where: str) -> str | None:
    """A shard name; ``set(shard=...)`` also checks ``WURK["SHARDS"]`` names it, while a class
    attribute is checked at its first push (defining a class never reads settings)."""
    if value is None:
        return None
    if not isinstance(value, str) or not QUEUE_NAME.match(value):
        raise ValueError(f"{where}: shard must be a shard name from WURK['SHARDS'], got {value!r}")
    if where.endswith(".set()"):
        try:
            wurk.config.shard_url(value)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return value


def delivery_options() -> Mapping[str, DeliveryCheck]:
    """Options that say how to deliver one push, not what the job is: handed to the pusher as
    its ``delivery`` and never stored in the payload. ``shard`` is the engine's; the others
    come from the features the engine is built from (the Django app's ``using`` and
    ``on_commit``), each with its check, so a bad value fails at ``set(...)`` or at class
    definition, not later at push time."""
    return {"shard": check_shard, **wurk.delivery_options}


def job_options() -> Mapping[str, DeliveryCheck]:
    """Options a feature gives a meaning to (``unique_for``, ``expires_in``, ...): unlike
    delivery options they are stored in the payload, where the feature's middleware (and a
    Ruby process) reads them; the engine knows their checks from its features."""
    return wurk.job_options


#: Relative intervals below this are seconds from now; above, an absolute epoch (Sidekiq's rule).
ABSOLUTE_EPOCH_THRESHOLD = 1_000_000_000


def validate_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check option values and return them normalised (timedeltas become seconds)."""
    out: dict[str, Any] = {}
    delivery, features = delivery_options(), job_options()
    for key, value in options.items():
        if key in RESERVED_KEYS:
            raise ValueError(f"{where}: {key!r} cannot be set as an option; the client writes it")
        check = delivery.get(key) or features.get(key)
        if check is not None:
            value = check(value, where)
        elif key == "queue":
            if not isinstance(value, str) or not QUEUE_NAME.match(value):
                raise ValueError(f"{where}: queue {value!r} must be a name matching [a-zA-Z0-9_:.-]+")
        elif key == "retry":
            if not isinstance(value, (bool, int)) or (not isinstance(value, bool) and value < 0):
                raise ValueError(f"{where}: retry must be True, False or a count >= 0, got {value!r}")
        elif key == "retry_for":
            if isinstance(value, timedelta):
                value = int(value.total_seconds())
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < 1_000_000_000
            ):
                raise ValueError(f"{where}: retry_for must be seconds (or a timedelta) > 0, got {value!r}")
        elif key == "retry_queue":
            if value is not None and (not isinstance(value, str) or not QUEUE_NAME.match(value)):
                raise ValueError(f"{where}: retry_queue {value!r} must be a queue name")
        elif key == "priority":
            value = priority.check(value, where)
        elif key == "dead":
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{where}: dead must be True or False, got {value!r}")
        elif key == "backtrace":
            if value is not None and (
                not isinstance(value, (bool, int)) or (not isinstance(value, bool) and value < 0)
            ):
                raise ValueError(f"{where}: backtrace must be True, False or a line count, got {value!r}")
        elif key == "tags":
            if value is not None:
                if isinstance(value, str) or not isinstance(value, Sequence):
                    raise ValueError(f"{where}: tags must be a list of strings, got {value!r}")
                if not all(isinstance(t, str) for t in value):
                    raise ValueError(f"{where}: tags must be a list of strings, got {value!r}")
                value = list(value)
        else:
            check_json_native(value, f"{where} option {key!r}")
        out[key] = value
    return out


def check_together(options: Mapping[str, Any], where: str) -> None:
    """The features' checks of the options together (``Feature.check_options``): a
    combination that cannot work (debounce with throttle) fails where one bad value does."""
    for check in wurk.options_checks:
        check(options, where)


def refuse_generator(fn: object, where: str) -> None:
    """A generator function's body runs only when iterated, which no worker does: refuse it
    now, rather than have every run count as a success without running."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ValueError(f"{where} is a generator function ('yield'), so a worker would never run its body")


class Job:
    """Base class for jobs. Subclasses are registered under ``wire_name`` when defined.

    Per execution the worker sets ``jid`` and ``payload`` (the decoded job, read-only by
    convention) on a fresh instance before calling ``perform``.
    """

    wire_name: ClassVar[str] = ""
    queue: ClassVar[str] = "default"
    retry: ClassVar[bool | int] = True
    retry_for: ClassVar[int | float | timedelta | None] = None
    retry_queue: ClassVar[str | None] = None
    dead: ClassVar[bool | None] = None
    backtrace: ClassVar[bool | int | None] = None
    tags: ClassVar[Sequence[str] | None] = None
    #: Runs before the queue's jobs of lower priority (-100...100, higher first; ``core/priority.py``).
    priority: ClassVar[int | None] = None
    #: Further payload keys (Sidekiq options this engine does not interpret).
    options: ClassVar[Mapping[str, Any]] = {}
    #: Enqueue in Rails' ActiveJob wrapper shape, so a Rails app's worker can run it as the
    #: ActiveJob class named ``wire_name`` (see ``django_wurk.core.activejob``).
    activejob: ClassVar[bool] = False
    #: The shard (``WURK["SHARDS"]``) this class's jobs are pushed to; ``None``: the current one.
    shard: ClassVar[str | None] = None

    jid: str
    payload: Payload

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("wire_name"):
            cls.wire_name = f"{cls.__module__}.{cls.__qualname__}"
        if not isinstance(cls.wire_name, str):
            raise ValueError(f"{cls.__qualname__}: wire_name must be a string")
        refuse_generator(cls.__dict__.get("perform"), f"{cls.__qualname__}.perform")
        cls._defaults = cls._collect_options()
        if not abstract:
            registry.register(cls)

    _defaults: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _collect_options(cls) -> dict[str, Any]:
        where = f"{cls.__module__}.{cls.__qualname__}"
        raw: dict[str, Any] = {}
        for key in KNOWN_OPTIONS:
            value = getattr(cls, key)
            if value is not None:
                raw[key] = value
        # A feature's option may be a class attribute too (``expires_in = 3600``), like ``queue``.
        for key in job_options():
            value = getattr(cls, key, None)
            if value is not None:
                raw[key] = value
        if cls.shard is not None:
            raw["shard"] = cls.shard
        raw.update(cls.options)
        checked = validate_options(raw, where)
        check_together(checked, where)
        return checked

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__qualname__} must define perform()")

    def retry_in(self, count: int, exc: BaseException) -> int | float | str | None:
        """Seconds until the next retry, ``"discard"``, ``"kill"``, or ``None`` for the default."""
        return None

    def retries_exhausted(self, payload: Payload, exc: BaseException) -> str | None:
        """Called once when retries run out; return ``"discard"`` to skip the dead set."""
        return None

    def retry_requested(self, exc: BaseException) -> int | float | None:
        """Seconds until a retry this job asked for itself (Celery's ``self.retry()``), or None.

        A requested retry is not a failure to be rationed: it goes to the retry set at exactly
        that delay (no jitter), whatever the ``retry`` limit, because the code asking for it
        has already counted (``django_wurk.celery`` uses this). None: the usual rules apply.
        """
        return None

    # Batches (see docs/batches.md) -------------------------------------------------------

    @property
    def bid(self) -> str | None:
        """The id of the batch this job belongs to, if any."""
        bid = getattr(self, "payload", {}).get("bid")
        return bid if isinstance(bid, str) and bid else None

    @property
    def batch(self) -> Batch | None:
        """This job's batch, to add jobs to it (``with self.batch.jobs(): ...``)."""
        from django_wurk.core.features.batches import Batch

        bid = self.bid
        return Batch(bid=bid) if bid else None

    def valid_within_batch(self) -> bool:
        """False once this job's batch (or an ancestor) was invalidated: skip the work."""
        batch = self.batch
        return batch.valid() if batch is not None else True

    # Enqueueing -----------------------------------------------------------------------

    # ``cls: type[Performs[P]]`` binds ``P`` to the subclass's ``perform`` for the type
    # checkers; at run time ``cls`` is the subclass itself.

    @classmethod
    def set(cls: type[Performs[P]], **options: Any) -> Setter[P]:
        return Setter(cast("type[Job]", cls), options)

    @classmethod
    def perform_async(cls: type[Performs[P]], *args: P.args, **kwargs: P.kwargs) -> str | None:
        return default_setter(cast("type[Job]", cls)).perform_async(*args, **kwargs)

    @classmethod
    def perform_in(
        cls: type[Performs[P]], interval: float | timedelta, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        return default_setter(cast("type[Job]", cls)).perform_in(interval, *args, **kwargs)

    @classmethod
    def perform_at(
        cls: type[Performs[P]], when: float | datetime, /, *args: P.args, **kwargs: P.kwargs
    ) -> str | None:
        return default_setter(cast("type[Job]", cls)).perform_at(when, *args, **kwargs)

    @classmethod
    def perform_bulk(
        cls,
        args_list: Iterable[Sequence[Any]],
        batch_size: int = 1000,
        *,
        at: When | Sequence[When] | None = None,
        spread_interval: float | timedelta | None = None,
    ) -> list[str | None]:
        return default_setter(cls).perform_bulk(args_list, batch_size, at=at, spread_interval=spread_interval)

    @classmethod
    def perform_inline(cls: type[Performs[P]], *args: P.args, **kwargs: P.kwargs) -> Any:
        return default_setter(cast("type[Job]", cls)).perform_inline(*args, **kwargs)


#: A time as ``perform_bulk(at=...)`` takes it: epoch seconds or an aware datetime.
When = float | int | datetime

#: Sidekiq's floor for ``spread_interval``: the scheduler looks about every 5 seconds.
MIN_SPREAD = 5.0


def epoch(value: Any, where: str) -> float:
    """``value`` (epoch seconds, or an aware datetime) as epoch seconds, or ``ValueError``."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{where} needs an aware datetime (naive times are ambiguous across servers)")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where} must be epoch seconds or an aware datetime, got {value!r}")
    if value < ABSOLUTE_EPOCH_THRESHOLD:
        raise ValueError(
            f"{where} must be a time (epoch seconds, or an aware datetime), got {value!r}, which would be "
            f"in 1970-2001; for a delay pass time.time() + seconds"
        )
    return float(value)


def bulk_times(
    at: When | Sequence[When] | None, spread_interval: float | timedelta | None
) -> Callable[[int], list[float | None]] | None:
    """``perform_bulk``'s ``at`` and ``spread_interval`` checked now (before any job is built),
    as the times of ``n`` jobs once ``n`` is known; None: every job now. A time past is
    ``None`` (pushed now)."""
    if at is not None and spread_interval is not None:
        raise ValueError("perform_bulk: give at or spread_interval, not both")
    if spread_interval is not None:
        spread = (
            spread_interval.total_seconds() if isinstance(spread_interval, timedelta) else spread_interval
        )
        if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 0 < spread < math.inf:
            raise ValueError(f"perform_bulk: spread_interval must be seconds > 0, got {spread_interval!r}")
        width = max(float(spread), MIN_SPREAD)

        def spread_out(n: int) -> list[float | None]:
            now = time.time()
            return [now + random.random() * width for _ in range(n)]

        return spread_out
    if at is None:
        return None
    if isinstance(at, (str, bytes)) or (not isinstance(at, Sequence) and isinstance(at, Iterable)):
        raise ValueError(f"perform_bulk: at must be a time or a list of times, got {at!r}")
    if isinstance(at, Sequence):
        if not at:
            raise ValueError("perform_bulk: at is an empty list (one time per job, or one time for all)")
        given = [epoch(value, f"perform_bulk: at[{i}]") for i, value in enumerate(at)]

        def each(n: int) -> list[float | None]:
            if n != len(given):
                raise ValueError(f"perform_bulk: at has {len(given)} times for {n} jobs (one per job)")
            now = time.time()
            return [t if t > now else None for t in given]

        return each
    one = epoch(at, "perform_bulk: at")

    def same(n: int) -> list[float | None]:
        return [one if one > time.time() else None] * n

    return same


_call_shapes: dict[type[Job], CallShape] = {}


def call_shape(job_class: type[Job]) -> CallShape:
    """What ``job_class``'s jobs may be called with, read from its function or ``perform``
    once; a class without its own ``perform`` (a job a Ruby worker runs) takes any call."""
    shape = _call_shapes.get(job_class)
    if shape is None:
        if issubclass(job_class, FunctionJob):
            shape = CallShape(job_class.wire_name, job_class.function)
        elif job_class.perform is Job.perform:
            shape = CallShape(job_class.wire_name, None)
        else:
            shape = CallShape(job_class.wire_name, job_class.perform, method=True)
        _call_shapes[job_class] = shape
    return shape


class Setter(Generic[P]):
    """A job class with per-call options, as returned by ``Job.set(...)``.

    Generic in the job's parameters (``P``) so ``send_welcome.set(queue="x").perform_async``
    is type-checked like ``send_welcome`` itself.
    """

    def __init__(self, job_class: type[Job], options: Mapping[str, Any] | None = None) -> None:
        self.job_class = job_class
        where = f"{job_class.wire_name}.set()"
        self.options = {**job_class._defaults, **validate_options(options or {}, where)}
        if options:
            check_together(self.options, where)
        # Everything before "args" is the same for every push through this setter.
        head: Payload = {
            "retry": self.options.get("retry", True),
            "queue": self.options.get("queue", "default"),
        }
        delivery = delivery_options()
        for key, value in self.options.items():
            if key not in ("retry", "queue") and key not in delivery:
                head[key] = value
        if not head.get("priority", True):  # priority 0 is the default: such a job is written as before
            del head["priority"]
        self._head = head
        # Read on every push: built once (``delivery`` hands out copies).
        self._delivery = {k: v for k, v in self.options.items() if k in delivery}
        self._shape = call_shape(job_class)

    def set(self, **options: Any) -> Setter[P]:
        return Setter(self.job_class, {**self.options, **options})

    def payload(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> Payload:
        """The payload this setter would push, before the client adds jid and times.

        The call is checked against the job's signature and for JSON here, so a bad one
        raises ``TypeError`` in the caller, naming the job and the argument. Keyword
        arguments go under the ``kwargs`` key (``core/arguments.py`` says why there).
        """
        args = list(args)
        self._shape.check(args, kwargs, wurk.config.strict_args)
        payload: Payload = self._head.copy()
        payload["args"] = args
        payload["class"] = self.job_class.wire_name
        if kwargs:
            if self.options.get("encrypt"):
                raise TypeError(
                    f"{self.job_class.wire_name}: an encrypt=True job seals its last positional "
                    "argument only, so keyword arguments would travel in clear; pass them positionally"
                )
            payload[KWARGS_KEY] = dict(kwargs)
        if self.job_class.activejob:
            from django_wurk.core import activejob

            return activejob.wrap(payload)
        return payload

    @property
    def delivery(self) -> dict[str, Any]:
        return dict(self._delivery)

    def perform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        return wurk.client.push(self.payload(args, kwargs), delivery=self._delivery, owned=True)

    # ``interval`` and ``when`` are positional-only: a job may have a parameter of that name.

    def perform_in(self, interval: float | timedelta, /, *args: P.args, **kwargs: P.kwargs) -> str | None:
        seconds = interval.total_seconds() if isinstance(interval, timedelta) else float(interval)
        at = seconds if seconds >= ABSOLUTE_EPOCH_THRESHOLD else time.time() + seconds
        return self._push_at(at, args, kwargs)

    def perform_at(self, when: float | datetime, /, *args: P.args, **kwargs: P.kwargs) -> str | None:
        if isinstance(when, datetime):
            if when.tzinfo is None:
                raise ValueError(
                    "perform_at needs an aware datetime (naive times are ambiguous across servers)"
                )
            return self._push_at(when.timestamp(), args, kwargs)
        return self.perform_in(when, *args, **kwargs)

    def _push_at(self, at: float, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        # Sidekiq pushes a job that is already due straight onto its queue.
        return wurk.client.push(
            self.payload(args, kwargs),
            at=at if at > time.time() else None,
            delivery=self._delivery,
            owned=True,
        )

    def perform_bulk(
        self,
        args_list: Iterable[Sequence[Any]],
        batch_size: int = 1000,
        *,
        at: When | Sequence[When] | None = None,
        spread_interval: float | timedelta | None = None,
    ) -> list[str | None]:
        """Push one job per item of ``args_list``, ``batch_size`` to a pipeline.

        As Sidekiq 8's ``perform_bulk``: ``at`` schedules every job at one time, or each at
        its own (a list as long as ``args_list``); ``spread_interval`` (seconds, at least 5)
        schedules each at a random moment within that many seconds from now, so a large bulk
        does not land on the workers at once. Times are epoch seconds or aware datetimes; a
        time already past pushes that job now, as ``perform_at`` does.
        """
        when = bulk_times(at, spread_interval)
        payloads: list[Payload] = []
        append = payloads.append
        activejob = self.job_class.activejob
        # ``payload`` inlined, with what is the same for every job read once: this loop is
        # most of a bulk push's time that is not encoding, and a call per job was a third of it.
        strict = wurk.config.strict_args
        head = self._head
        name = self.job_class.wire_name
        shape = self._shape
        fewest, most = (shape.fewest, shape.most) if not shape.needs_keywords else (math.inf, 0)
        for i, args in enumerate(args_list):
            # type() first: isinstance() against the Sequence ABC is slow, and this runs per job.
            if type(args) not in (list, tuple) and (
                isinstance(args, (str, bytes)) or not isinstance(args, Sequence)
            ):
                raise TypeError(f"perform_bulk item {i} must be a list or tuple of arguments, got {args!r}")
            if activejob:
                append(self.payload(args))
                continue
            args = list(args)
            # No generator here: its frame cost as much as the rest of the check.
            suspect = not fewest <= len(args) <= most
            if strict and not suspect:
                for item in args:
                    if type(item) not in FLAT_TYPES:
                        suspect = True
                        break
            if suspect:
                try:
                    shape.check(args, None, strict)
                except TypeError as exc:
                    raise TypeError(f"perform_bulk item {i}: {exc}") from None
            payload = head.copy()
            payload["args"] = args
            payload["class"] = name
            append(payload)
        times = when(len(payloads)) if when is not None else None
        return wurk.client.push_bulk(
            payloads, at=times, batch_size=batch_size, delivery=self._delivery, owned=True
        )

    def perform_inline(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run now, in this thread, through both middleware chains and a JSON round trip."""
        return wurk.run_inline(self.payload(args, kwargs))


_default_setters: dict[type[Job], Setter[...]] = {}


def default_setter(job_class: type[Job]) -> Setter[...]:
    """The option-less setter of a job class, built once: it is on every enqueue's path."""
    setter = _default_setters.get(job_class)
    if setter is None:
        setter = _default_setters[job_class] = Setter(job_class)
    return setter


class FunctionJob(Job, abstract=True):
    """The class ``@job`` builds around a function."""

    function: ClassVar[Callable[..., Any]]
    retry_in_hook: ClassVar[Callable[[int, BaseException], int | float | str | None] | None] = None
    retries_exhausted_hook: ClassVar[Callable[[Payload, BaseException], str | None] | None] = None

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        return type(self).function(*args, **kwargs)

    def retry_in(self, count: int, exc: BaseException) -> int | float | str | None:
        hook = type(self).retry_in_hook
        return hook(count, exc) if hook else None

    def retries_exhausted(self, payload: Payload, exc: BaseException) -> str | None:
        hook = type(self).retries_exhausted_hook
        return hook(payload, exc) if hook else None


class JobFunction(Generic[P, R]):
    """What ``@job`` returns: the function, still callable directly, plus the enqueue API."""

    def __init__(self, job_class: type[FunctionJob], fn: Callable[P, R]) -> None:
        self.job_class = job_class
        self.wire_name = job_class.wire_name
        self.__wrapped__ = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<job {self.wire_name}>"

    def set(self, **options: Any) -> Setter[P]:
        return Setter(self.job_class, options)

    def perform_async(self, *args: P.args, **kwargs: P.kwargs) -> str | None:
        return default_setter(self.job_class).perform_async(*args, **kwargs)

    def perform_in(self, interval: float | timedelta, /, *args: P.args, **kwargs: P.kwargs) -> str | None:
        return default_setter(self.job_class).perform_in(interval, *args, **kwargs)

    def perform_at(self, when: float | datetime, /, *args: P.args, **kwargs: P.kwargs) -> str | None:
        return default_setter(self.job_class).perform_at(when, *args, **kwargs)

    def perform_bulk(
        self,
        args_list: Iterable[Sequence[Any]],
        batch_size: int = 1000,
        *,
        at: When | Sequence[When] | None = None,
        spread_interval: float | timedelta | None = None,
    ) -> list[str | None]:
        return default_setter(self.job_class).perform_bulk(
            args_list, batch_size, at=at, spread_interval=spread_interval
        )

    def perform_inline(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        return default_setter(self.job_class).perform_inline(*args, **kwargs)


RetryIn = Callable[[int, BaseException], int | float | str | None]
RetriesExhausted = Callable[[Payload, BaseException], str | None]


@overload
def job(fn: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    *,
    wire_name: str | None = None,
    activejob: bool = False,
    retry_in: RetryIn | None = None,
    retries_exhausted: RetriesExhausted | None = None,
    **options: Any,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(
    fn: Callable[P, R] | None = None,
    /,
    *,
    wire_name: str | None = None,
    activejob: bool = False,
    retry_in: RetryIn | None = None,
    retries_exhausted: RetriesExhausted | None = None,
    **options: Any,
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Turn a module-level function into a job: ``@job`` or ``@job(queue="mailers", retry=5)``.

    The function may be ``async def``: a worker runs it on its thread's event loop. A
    ``job(...)`` kept in a variable gives every function it decorates the same options.
    """

    def wrap(f: Callable[P, R]) -> JobFunction[P, R]:
        if "<locals>" in f.__qualname__:
            raise ValueError(
                f"@job needs a module-level function; {f.__qualname__} is nested, "
                "so a worker could not find it"
            )
        refuse_generator(f, f"@job {f.__qualname__}")
        # Read, never consumed: one ``job(...)`` may decorate many functions.
        known = {k: v for k, v in options.items() if k in KNOWN_OPTIONS}
        attrs: dict[str, Any] = {
            "function": staticmethod(f),
            "retry_in_hook": staticmethod(retry_in) if retry_in else None,
            "retries_exhausted_hook": staticmethod(retries_exhausted) if retries_exhausted else None,
            "options": {k: v for k, v in options.items() if k not in KNOWN_OPTIONS},
            "wire_name": wire_name or f"{f.__module__}.{f.__qualname__}",
            "activejob": activejob,
            "__module__": f.__module__,
            "__qualname__": f.__qualname__,
            "__doc__": f.__doc__,
            **known,
        }
        job_class = type(f.__name__, (FunctionJob,), attrs)
        return JobFunction(job_class, f)

    if fn is not None:
        return wrap(fn)
    return wrap
