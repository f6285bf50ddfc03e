"""``manage.py wurk_import_celery_beat``: django-celery-beat's schedules as ``Schedule`` rows.

Each ``PeriodicTask`` of django-celery-beat (with its ``CrontabSchedule`` or
``IntervalSchedule``) becomes a periodic schedule of the same name, which the leader fires
(docs/periodic.md, "Schedules in the admin"). The mapping is the one ``CELERY_BEAT_SCHEDULE``
entries get (``django_wurk.celery.schedules``: crontab fields in cron's order, intervals that
divide an hour or a day, kombu's JSON for the arguments), and a task that cannot be carried
over exactly is left out with the reason, never guessed at. Running it again updates the rows
it made (by name), so it can follow the beat tables until the cutover.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

INTERVAL_UNITS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}


class Command(BaseCommand):
    help = "Copy django-celery-beat's periodic tasks into django-wurk's periodic schedules."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be imported; write nothing"
        )
        parser.add_argument(
            "--disabled",
            action="store_true",
            help="import every schedule disabled (while celery beat still fires them: enable at the cutover)",
        )
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        if not apps.is_installed("django_celery_beat"):
            raise CommandError(
                "django-celery-beat is not installed: add 'django_celery_beat' to INSTALLED_APPS "
                "to import its schedules"
            )
        from django_celery_beat.models import PeriodicTask

        from django_wurk.core.registry import registry
        from django_wurk.models import Schedule
        from django_wurk.periodic import schedule_problems

        imported: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        tasks = PeriodicTask.objects.select_related("crontab", "interval", "solar", "clocked").order_by(
            "name"
        )
        with transaction.atomic():
            for task in tasks:
                try:
                    fields, notes = _schedule_fields(task)
                except ValueError as exc:
                    skipped.append({"name": task.name, "task": task.task, "reason": str(exc)})
                    continue
                checked = {k: fields[k] for k in ("cron", "job", "args", "kwargs", "queue", "tz")}
                found = schedule_problems(registry=registry, **checked)
                if found:
                    reason = "; ".join(f"{k}: {v}" for k, v in found.items())
                    skipped.append({"name": task.name, "task": task.task, "reason": reason})
                    continue
                if options["disabled"]:
                    fields["enabled"] = False
                exists = Schedule.objects.filter(name=task.name).exists()
                if not options["dry_run"]:
                    Schedule.objects.update_or_create(name=task.name, defaults=fields)
                imported.append({"name": task.name, **fields, "updated": exists, "notes": notes})
        if options["json"]:
            self.stdout.write(
                json.dumps({"imported": imported, "skipped": skipped, "dry_run": options["dry_run"]})
            )
            return
        verb = "would import" if options["dry_run"] else "imported"
        for item in imported:
            how = "updated" if item["updated"] else "new"
            state = "" if item["enabled"] else ", disabled"
            self.stdout.write(f"{verb} {item['name']!r} ({how}{state}): {item['cron']} {item['job']}")
            for note in item["notes"]:
                self.stdout.write(f"    note: {note}")
        for item in skipped:
            self.stdout.write(
                self.style.WARNING(f"skipped {item['name']!r} ({item['task']}): {item['reason']}")
            )
        self.stdout.write(f"{len(imported)} {verb}, {len(skipped)} skipped")


def _schedule_fields(task: Any) -> tuple[dict[str, Any], list[str]]:
    """The ``Schedule`` fields for one ``PeriodicTask``, and what was dropped; ``ValueError``
    for a task that cannot fire the same way here."""
    from django_wurk.celery.schedules import crontab, periodic_entries

    if task.one_off:
        raise ValueError("one_off tasks run once; enqueue the job with perform_at instead")
    if task.expires is not None or task.expire_seconds is not None:
        raise ValueError("an expiring task has no periodic equivalent here (expires is set)")
    if task.solar_id is not None:
        raise ValueError("solar schedules have no cron equivalent")
    if task.clocked_id is not None:
        raise ValueError("a clocked schedule runs once; enqueue the job with perform_at instead")
    timezone: str | None = None
    if task.crontab is not None:
        c = task.crontab
        schedule: Any = crontab(minute=c.minute, hour=c.hour, day_of_week=c.day_of_week,
                                day_of_month=c.day_of_month, month_of_year=c.month_of_year)  # fmt: skip
        timezone = str(c.timezone) if c.timezone else None
    elif task.interval is not None:
        unit = INTERVAL_UNITS.get(task.interval.period)
        if unit is None:
            raise ValueError(
                f"interval period {task.interval.period!r} is not one django-celery-beat defines"
            )
        schedule = timedelta(seconds=task.interval.every * unit)
    else:
        raise ValueError("it has no schedule")
    try:
        args = json.loads(task.args or "[]")
        kwargs = json.loads(task.kwargs or "{}")
    except ValueError as exc:
        raise ValueError(f"its args or kwargs are not JSON ({exc})") from None
    entry = {"task": task.task, "schedule": schedule, "args": args, "kwargs": kwargs,
             "options": {"queue": task.queue} if task.queue else {}}  # fmt: skip
    beat = periodic_entries({task.name: entry}, timezone)
    if task.name in beat.skipped:
        raise ValueError(beat.skipped[task.name])
    [mapped] = beat.entries
    notes = list(beat.notes.get(task.name, []))
    dropped = [name for name in ("exchange", "routing_key", "priority") if getattr(task, name, None)]
    if task.headers and task.headers != "{}":
        dropped.append("headers")
    if task.start_time is not None:
        dropped.append("start_time")
    if dropped:
        notes.append(f"dropped: {', '.join(dropped)}")
    fields = {
        "cron": mapped["cron"],
        "job": mapped["job"],
        "args": mapped.get("args", []),
        "kwargs": mapped.get("kwargs", {}),
        "queue": mapped.get("queue", ""),
        "tz": mapped.get("tz", "UTC"),
        "enabled": bool(task.enabled),
    }
    return fields, notes
