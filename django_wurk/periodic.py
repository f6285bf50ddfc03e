"""``WURK["PERIODIC"]``: the periodic entries in settings, read and checked for the engine.

Each entry is a dict: ``cron`` (a cron expression) and ``job`` (a registered job's wire
name, or the dotted path ``module.qualname`` of its ``@job`` function or ``Job`` class) are
required; ``args`` (a list), ``queue``, ``retry`` and ``tz`` (an IANA time zone, UTC when
absent) are optional. Reading happens in two steps because jobs are registered only when
the apps' ``jobs`` modules are imported: ``parse_entries`` checks the shape, the cron
expression and the time zone when the settings are built; ``loop_specs`` finds each job
once the registry is full (``runwurk`` start-up, ``manage.py check``). Every message names
the entry by its index and job, so a list of twenty entries says which one is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django_wurk.core.config import ConfigError
from django_wurk.core.job import Job, validate_options
from django_wurk.core.registry import Registry
from django_wurk.core.wire import check_json_native

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.features.periodic import LoopSpec

SETTING = "PERIODIC"
REQUIRED = ("cron", "job")
OPTIONAL = ("args", "queue", "retry", "tz")


@dataclass(frozen=True)
class PeriodicEntry:
    """One entry of ``WURK["PERIODIC"]``, its shape, cron and time zone checked."""

    index: int
    cron: str
    job: str
    args: tuple[Any, ...] = ()
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
            if find_job(entry.job, registry) is None:
                problems.append(_unknown_job(entry))
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
    try:
        check_json_native(list(args), "args")
        overrides = validate_options({k: item[k] for k in ("queue", "retry") if k in item}, where)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
    return PeriodicEntry(
        index=index,
        cron=item["cron"],
        job=item["job"],
        args=tuple(args),
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
        specs.append(
            LoopSpec(
                Cron.parse(entry.cron),
                job_class,
                args=entry.args,
                queue=entry.queue,
                retry=entry.retry,
                tz=parse_timezone(entry.tz) if entry.tz else DEFAULT_TZ,
                source=f"WURK['PERIODIC'] {entry.where}",
            )
        )
    return specs


def install_from_settings(wurk: Wurk, entries: Sequence[PeriodicEntry], leader: bool, ttl: float) -> None:
    """Have ``runwurk``'s processes campaign and fire ``entries``, unless ``leader`` is off
    (``WURK["PERIODIC"]``, ``WURK["LEADER"]`` and ``WURK["LEADER_TTL"]``)."""
    from django_wurk.core.features.periodic import features

    if not leader:
        return
    wurk.use(*features(loop_specs(entries, wurk.registry), ttl=ttl))


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
