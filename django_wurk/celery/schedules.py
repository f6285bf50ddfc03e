"""Celery beat schedules as periodic-job entries: ``CELERY_BEAT_SCHEDULE`` -> ``WURK["PERIODIC"]``.

``periodic_entries(schedule)`` turns each beat entry into the dict a periodic-jobs entry is
(``cron``, ``job``, ``args``, ``kwargs``, ``queue``, ``tz``), and says, entry by entry, what it could not
carry over and why, instead of guessing: a periodic job fires on a cron expression aligned
to the clock, with positional arguments only. The rules are the ones
docs/migrate-from-celery.md gives (and the periodic jobs' own migration table): ``crontab``
fields in cron's order with day names as numbers, an interval only where it divides an hour
or a day evenly, no seconds, no ``solar``.

``crontab`` and ``schedule`` are here too, where Celery has them (``celery.schedules``), so a settings module
keeps its beat schedule by changing that import. The settings pass
``periodic_entries(...).entries`` to ``WURK["PERIODIC"]`` themselves (one visible line, one
way to configure periodic jobs), and ``manage.py check`` names every ``CELERY_BEAT_SCHEDULE``
entry that was left out, or not imported (``django_wurk.checks.check_celery_beat``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django_wurk.celery import codec
from django_wurk.core.features.periodic.cron import Cron, parse_timezone

_DAYS = {"sun": "0", "mon": "1", "tue": "2", "wed": "3", "thu": "4", "fri": "5", "sat": "6"}
_DAY_NAME = re.compile(r"[a-zA-Z]+")


class crontab:
    """Celery's ``crontab(minute, hour, day_of_week, day_of_month, month_of_year)``, as data."""

    def __init__(
        self,
        minute: Any = "*",
        hour: Any = "*",
        day_of_week: Any = "*",
        day_of_month: Any = "*",
        month_of_year: Any = "*",
        **_ignored: Any,
    ) -> None:
        self._orig_minute = minute
        self._orig_hour = hour
        self._orig_day_of_week = day_of_week
        self._orig_day_of_month = day_of_month
        self._orig_month_of_year = month_of_year

    def __repr__(self) -> str:
        return f"<crontab: {cron_of(self)}>"


class schedule:
    """Celery's ``schedule(run_every)``: an interval (a timedelta or seconds), as data."""

    def __init__(self, run_every: timedelta | float | None = None, relative: bool = False, **_ignored: Any):
        if isinstance(run_every, (int, float)) and not isinstance(run_every, bool):
            run_every = timedelta(seconds=run_every)
        if not isinstance(run_every, timedelta):
            raise ValueError(f"schedule(run_every=...) must be a timedelta or seconds, got {run_every!r}")
        self.run_every = run_every
        self.relative = relative

    def __repr__(self) -> str:
        return f"<freq: {self.run_every}>"


def _field(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in sorted(value, key=str))
    return str(value).strip() or "*"


def _days(value: str) -> str:
    """Day names (``mon-fri``) as cron numbers; an unknown name raises ``ValueError``."""

    def number(match: re.Match[str]) -> str:
        name = match.group().lower()[:3]
        if name not in _DAYS:
            raise ValueError(f"{match.group()!r} is not a day of the week")
        return _DAYS[name]

    return _DAY_NAME.sub(number, value)


def cron_of(schedule: Any) -> str:
    """A ``crontab`` (ours or Celery's: both keep the fields as given) as a cron expression."""
    parts = [
        _field(schedule._orig_minute),
        _field(schedule._orig_hour),
        _field(schedule._orig_day_of_month),
        _field(schedule._orig_month_of_year),
        _days(_field(schedule._orig_day_of_week)),
    ]
    return " ".join(parts)


def cron_for_interval(seconds: float) -> str:
    """The cron expression firing every ``seconds``, aligned to the clock; ``ValueError`` if none
    fires at exactly that interval."""
    if seconds < 60:
        raise ValueError(f"every {seconds:g} s: cron has no seconds; fire every minute instead")
    if seconds % 60:
        raise ValueError(f"every {seconds:g} s is not a whole number of minutes")
    minutes = int(seconds // 60)
    if minutes < 60 and 60 % minutes == 0:
        return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
    if minutes % 60 == 0:
        hours = minutes // 60
        if hours < 24 and 24 % hours == 0:
            return "0 * * * *" if hours == 1 else f"0 */{hours} * * *"
        if hours == 24:
            return "0 0 * * *"
        if hours == 24 * 7:
            return "0 0 * * 0"
    raise ValueError(
        f"every {minutes} min does not divide an hour or a day evenly, so no cron expression "
        "fires at exactly that interval; choose one (e.g. list the times)"
    )


@dataclass
class BeatImport:
    """What ``periodic_entries`` made of a beat schedule."""

    #: ``WURK["PERIODIC"]`` entries, in the schedule's order.
    entries: list[dict[str, Any]] = field(default_factory=list)
    #: ``{beat entry name: why it was left out}``.
    skipped: dict[str, str] = field(default_factory=dict)
    #: ``{beat entry name: what was dropped or differs}``, for entries that were imported.
    notes: dict[str, list[str]] = field(default_factory=dict)


def periodic_entries(schedule: Mapping[str, Any], timezone: str | None = None) -> BeatImport:
    """Map a beat schedule (``CELERY_BEAT_SCHEDULE``) to periodic-job entries, and report the rest."""
    out = BeatImport()
    for name, entry in schedule.items():
        try:
            item, notes = _entry(entry, timezone)
        except (ValueError, TypeError, AttributeError) as exc:
            out.skipped[str(name)] = str(exc)
            continue
        out.entries.append(item)
        if notes:
            out.notes[str(name)] = notes
    return out


def _entry(entry: Any, timezone: str | None) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(entry, Mapping):
        raise TypeError(f"a beat entry is a dict, got {type(entry).__name__}")
    task = entry.get("task")
    if not isinstance(task, str) or not task:
        raise ValueError("it names no task")
    notes: list[str] = []
    sched = entry.get("schedule")
    every = getattr(sched, "run_every", None)  # Celery's schedule(run_every=...), or ours
    if isinstance(sched, timedelta):
        cron = cron_for_interval(sched.total_seconds())
        notes.append("an interval becomes a cron expression aligned to the clock, not to a start time")
    elif isinstance(sched, (int, float)) and not isinstance(sched, bool):
        cron = cron_for_interval(float(sched))
        notes.append("an interval becomes a cron expression aligned to the clock, not to a start time")
    elif all(hasattr(sched, f"_orig_{f}") for f in ("minute", "hour", "day_of_week", "day_of_month")):
        cron = cron_of(sched)
        if Cron.parse(cron).either_day:
            notes.append(
                "day_of_month and day_of_week are both set: cron fires on days matching either, "
                "Celery on days matching both"
            )
    elif isinstance(every, timedelta):
        cron = cron_for_interval(every.total_seconds())
        notes.append("an interval becomes a cron expression aligned to the clock, not to a start time")
    elif type(sched).__name__ == "solar":
        raise ValueError("solar schedules have no cron equivalent")
    else:
        raise ValueError(f"schedule {sched!r} is neither a crontab nor an interval")
    Cron.parse(cron)  # what the periodic jobs will read: a field it refuses skips the entry
    item: dict[str, Any] = {"cron": cron, "job": task, "args": codec.encode(list(entry.get("args") or ()))}
    kwargs = entry.get("kwargs")
    if kwargs:
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise ValueError("its kwargs are not a dict with string keys")
        item["kwargs"] = codec.encode(dict(kwargs))
    options = dict(entry.get("options") or {})
    queue = options.pop("queue", None)
    if queue:
        item["queue"] = queue
    if options:
        notes.append(f"options dropped: {', '.join(sorted(options))}")
    if entry.get("relative"):
        notes.append("relative=True has no meaning for a cron schedule")
    if timezone and timezone != "UTC":
        parse_timezone(timezone)
        item["tz"] = timezone
    return item, notes


__all__ = ["BeatImport", "crontab", "periodic_entries", "schedule"]
