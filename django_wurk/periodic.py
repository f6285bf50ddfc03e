"""``WURK["PERIODIC"]``: the periodic entries in settings, read and checked for the engine.

Each entry is a dict: ``cron`` (a cron expression) and ``job`` (a registered job's wire
name, or the dotted path ``module.qualname`` of its ``@job`` function or ``Job`` class) are
required; ``args`` (a list), ``kwargs`` (a dict of keyword arguments), ``queue``, ``retry``
and ``tz`` (an IANA time zone, UTC when absent) are optional. Reading happens in two steps
because jobs are registered only when the apps' ``jobs`` modules are imported:
``parse_entries`` checks the shape, the cron expression and the time zone when the settings
are built; ``loop_specs`` finds each job once the registry is full (``runwurk`` start-up,
``manage.py check``). Every message names the entry by its index and job, so a list of
twenty entries says which one is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django_wurk.core.config import QUEUE_NAME, ConfigError
from django_wurk.core.job import Job, call_shape, validate_options
from django_wurk.core.registry import Registry
from django_wurk.core.wire import check_json_native

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.features.periodic import LoopSource, LoopSpec

SETTING = "PERIODIC"
REQUIRED = ("cron", "job")
OPTIONAL = ("args", "kwargs", "queue", "retry", "tz")


@dataclass(frozen=True)
class PeriodicEntry:
    """One entry of ``WURK["PERIODIC"]``, its shape, cron and time zone checked."""

    index: int
    cron: str
    job: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    retry: bool | int | None = None
    tz: str | None = None

    @property
    def where(self) -> str:
        return describe(self.index, self.job)


def describe(index: int, job: Any) -> str:
    return f"entry {index} (job {job!r})" if isinstance(job, str) else f"entry {index}"


def parse_entries(key: str, raw: Any) -> tuple[PeriodicEntry, ...]:
    """The entries of ``raw`` (a list of dicts, or its JSON text from the environment).

    Raises ``ConfigError`` naming ``key`` and the first bad entry.
    """
    entries, problems = _read(raw)
    if problems:
        raise ConfigError(key, problems[0])
    return entries


def entry_problems(raw: Any, registry: Registry | None = None) -> list[str]:
    """Every problem of ``raw``, one message per bad entry (for ``manage.py check``).

    With ``registry``, an entry whose job is not registered is a problem too.
    """
    entries, problems = _read(raw)
    if registry is not None:
        for entry in entries:
            job_class = find_job(entry.job, registry)
            if job_class is None:
                problems.append(_unknown_job(entry))
                continue
            try:
                call_shape(job_class).check(entry.args, entry.kwargs, True)
            except TypeError as exc:
                problems.append(f"{entry.where}: {exc}")
    return problems


def _read(raw: Any) -> tuple[tuple[PeriodicEntry, ...], list[str]]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else []
        except ValueError as exc:
            return (), [
                f"must be a list of entries (in the environment, as JSON); the text is not JSON ({exc})"
            ]
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        return (), [f"must be a list of entries (dicts with 'cron' and 'job'), got {type(raw).__name__}"]
    entries: list[PeriodicEntry] = []
    problems: list[str] = []
    for index, item in enumerate(raw):
        try:
            entries.append(_entry(index, item))
        except ValueError as exc:
            problems.append(str(exc))
    return tuple(entries), problems


def _entry(index: int, item: Any) -> PeriodicEntry:
    from django_wurk.core.features.periodic.cron import Cron, CronError, parse_timezone

    if not isinstance(item, Mapping):
        raise ValueError(f"entry {index} must be a dict with 'cron' and 'job', got {type(item).__name__}")
    where = describe(index, item.get("job"))
    unknown = sorted(str(k) for k in item if k not in REQUIRED + OPTIONAL)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"an entry has {', '.join(REQUIRED + OPTIONAL)}"
        )
    for name in REQUIRED:
        if not isinstance(item.get(name), str) or not item[name].strip():
            raise ValueError(f"{where}: {name!r} is required and must be a non-empty string")
    try:
        Cron.parse(item["cron"])
    except CronError as exc:
        raise ValueError(f"{where}: bad cron {item['cron']!r}: {exc}") from None
    tz = item.get("tz")
    if tz is not None:
        try:
            parse_timezone(tz)
        except CronError as exc:
            raise ValueError(f"{where}: bad tz: {exc}") from None
    args = item.get("args", [])
    if not isinstance(args, (list, tuple)):
        raise ValueError(f"{where}: 'args' must be a list, got {type(args).__name__}")
    kwargs = item.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"{where}: 'kwargs' must be a dict, got {type(kwargs).__name__}")
    try:
        check_json_native(list(args), "args")
        check_json_native(dict(kwargs), "kwargs")
        overrides = validate_options({k: item[k] for k in ("queue", "retry") if k in item}, where)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
    return PeriodicEntry(
        index=index,
        cron=item["cron"],
        job=item["job"],
        args=tuple(args),
        kwargs=dict(kwargs),
        queue=overrides.get("queue"),
        retry=overrides.get("retry"),
        tz=tz,
    )


def find_job(name: str, registry: Registry) -> type[Job] | None:
    """The registered job whose wire name, or dotted path ``module.qualname``, is ``name``.

    Only registered classes: settings never make the worker import code.
    """
    found = registry.resolve(name)
    if found is not None:
        return found
    for wire_name in registry.names():
        job_class = registry.resolve(wire_name)
        if job_class is not None and f"{job_class.__module__}.{job_class.__qualname__}" == name:
            return job_class
    return None


def _unknown_job(entry: PeriodicEntry) -> str:
    return (
        f"{entry.where}: no registered job is named {entry.job!r}; give a job's wire name or the "
        "dotted path of its @job function or Job class, defined in an installed app's jobs module"
    )


def loop_specs(entries: Sequence[PeriodicEntry], registry: Registry) -> list[LoopSpec]:
    """The engine's loops for ``entries``; ``ConfigError`` for an entry whose job is unknown."""
    from django_wurk.core.features.periodic import DEFAULT_TZ, LoopSpec
    from django_wurk.core.features.periodic.cron import Cron, parse_timezone

    specs = []
    for entry in entries:
        job_class = find_job(entry.job, registry)
        if job_class is None:
            raise ConfigError(SETTING, _unknown_job(entry))
        try:
            call_shape(job_class).check(entry.args, entry.kwargs, True)
        except TypeError as exc:  # arguments the job cannot take: it would fail at every fire
            raise ConfigError(SETTING, f"{entry.where}: {exc}") from None
        specs.append(
            LoopSpec(
                Cron.parse(entry.cron),
                job_class,
                args=entry.args,
                kwargs=entry.kwargs,
                queue=entry.queue,
                retry=entry.retry,
                tz=parse_timezone(entry.tz) if entry.tz else DEFAULT_TZ,
                source=f"WURK['PERIODIC'] {entry.where}",
            )
        )
    return specs


def schedule_problems(
    *,
    cron: Any,
    job: Any,
    args: Any,
    kwargs: Any,
    queue: Any,
    tz: Any,
    registry: Registry,
) -> dict[str, str]:
    """What is wrong with a schedule (a ``Schedule`` row, ``django_wurk.schedules``), by field;
    empty when it can run. The admin form shows these; the leader skips a row that has any."""
    from django_wurk.core.features.periodic.cron import Cron, CronError, parse_timezone

    found: dict[str, str] = {}
    try:
        Cron.parse(cron if isinstance(cron, str) else "")
    except CronError as exc:
        found["cron"] = f"not a cron expression: {exc}"
    job_class = find_job(job, registry) if isinstance(job, str) and job else None
    if job_class is None:
        found["job"] = (
            f"no registered job is named {job!r}; give a job's wire name or the dotted path of its "
            "@job function or Job class, defined in an installed app's jobs module"
        )
    if not isinstance(args, list):
        found["args"] = f"must be a JSON list of positional arguments, got {type(args).__name__}"
    if not isinstance(kwargs, Mapping):
        found["kwargs"] = f"must be a JSON object of keyword arguments, got {type(kwargs).__name__}"
    if job_class is not None and "args" not in found and "kwargs" not in found:
        try:
            call_shape(job_class).check(args, kwargs, True)
            check_json_native(args, "args")
        except TypeError as exc:
            found["kwargs" if kwargs and "keyword" in str(exc) else "args"] = str(exc)
    if queue and (not isinstance(queue, str) or not QUEUE_NAME.match(queue)):
        found["queue"] = f"{queue!r} is not a queue name (letters, digits and _:.-)"
    if tz:
        try:
            parse_timezone(tz)
        except CronError as exc:
            found["tz"] = str(exc)
    return found


def install_from_settings(
    wurk: Wurk,
    entries: Sequence[PeriodicEntry],
    leader: bool,
    ttl: float,
    source: LoopSource | None = None,
    refresh: float = 5.0,
) -> None:
    """Have ``runwurk``'s processes campaign and fire ``entries``, and the loops ``source``
    returns (the admin's schedules, ``django_wurk.schedules``), unless ``leader`` is off
    (``WURK["PERIODIC"]``, ``WURK["LEADER"]`` and ``WURK["LEADER_TTL"]``)."""
    from django_wurk.core.features.periodic import features

    if not leader:
        return
    wurk.use(*features(loop_specs(entries, wurk.registry), ttl=ttl, source=source, refresh=refresh))


def install_history(wurk: Wurk, interval: float, retention_days: float, leader: bool) -> None:
    """Have the leader record historical metrics (``WURK["HISTORY_INTERVAL"]`` and
    ``WURK["HISTORY_RETENTION"]``, in days; 0 records none). A leader duty: it needs the
    election ``install_from_settings`` joins, so with ``WURK["LEADER"] = False`` this process
    records nothing."""
    from django_wurk.core.features import history

    if retention_days and leader:
        wurk.use(history.feature(interval, retention_days * 86_400))
    else:
        wurk.drop(history.DUTY)
