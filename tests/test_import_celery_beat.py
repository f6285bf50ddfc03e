"""``manage.py wurk_import_celery_beat`` against the real django-celery-beat tables.

Runs wherever the suite's database is: SQLite in pass 1, PostgreSQL in CI's pass 3.
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

# The test extras bring it on Python < 3.12 (it caps Django below 6.1; pyproject.toml).
pytest.importorskip("django_celery_beat", reason="django-celery-beat is not installed (Django 6.1+ pass)")
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule

from django_wurk.models import Schedule

TRACKED = "tests.jobsapp.jobs.tracked"


def crontab(**fields: Any) -> CrontabSchedule:
    values = {"minute": "*", "hour": "*", "day_of_week": "*", "day_of_month": "*", "month_of_year": "*"}
    values.update(fields)
    return CrontabSchedule.objects.create(**values)


def task(name: str, **fields: Any) -> PeriodicTask:
    values: dict[str, Any] = {"task": TRACKED, "args": "[1]"}
    values.update(fields)
    return PeriodicTask.objects.create(name=name, **values)


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("wurk_import_celery_beat", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def beat(db: None) -> None:
    task("weekday report", crontab=crontab(minute="30", hour="7", day_of_week="mon-fri", timezone="Europe/Berlin"),
         args="[42]", kwargs='{"seconds": 0.5}', queue="reports")  # fmt: skip
    task("every 5 min", interval=IntervalSchedule.objects.create(every=5, period="minutes"), enabled=False)
    task("every 7 min", interval=IntervalSchedule.objects.create(every=7, period="minutes"))
    task("sunrise", solar=SolarSchedule.objects.create(event="sunrise", latitude=48.8, longitude=2.3))
    task("unknown task", task="proj.tasks.nope", crontab=crontab(minute="0"))
    task("bad call", crontab=crontab(minute="0"), args="[1]", kwargs='{"speed": 2}')
    task("one off", crontab=crontab(minute="0"), one_off=True)


def test_crontab_and_interval_tasks_become_schedules_and_the_rest_is_reported(beat: None) -> None:
    outcome = run()
    assert {i["name"] for i in outcome["imported"]} == {"weekday report", "every 5 min"}
    report = Schedule.objects.get(name="weekday report")
    assert (report.cron, report.job, report.args, report.kwargs, report.queue, report.tz, report.enabled) == (
        "30 7 * * 1-5",
        TRACKED,
        [42],
        {"seconds": 0.5},
        "reports",
        "Europe/Berlin",
        True,
    )
    interval = Schedule.objects.get(name="every 5 min")
    assert (interval.cron, interval.enabled, interval.tz) == ("*/5 * * * *", False, "UTC")
    skipped = {s["name"]: s["reason"] for s in outcome["skipped"]}
    assert set(skipped) == {"every 7 min", "sunrise", "unknown task", "bad call", "one off"}
    assert "divide an hour or a day" in skipped["every 7 min"]
    assert "solar" in skipped["sunrise"] and "one_off" in skipped["one off"]
    assert "no registered job is named 'proj.tasks.nope'" in skipped["unknown task"]
    assert "unexpected keyword argument 'speed'" in skipped["bad call"]
    # What was imported passes the admin's own checks.
    for row in Schedule.objects.all():
        row.full_clean()


def test_running_it_again_updates_by_name_and_dry_run_writes_nothing(beat: None) -> None:
    assert run("--dry-run")["dry_run"] is True and not Schedule.objects.exists()
    run()
    PeriodicTask.objects.filter(name="weekday report").update(args="[43]", enabled=False)
    outcome = run("--disabled")
    report = Schedule.objects.get(name="weekday report")
    assert report.args == [43] and not report.enabled
    assert Schedule.objects.count() == 2 and all(i["updated"] for i in outcome["imported"])


def test_the_text_output_names_each_task(beat: None) -> None:
    out = StringIO()
    call_command("wurk_import_celery_beat", stdout=out)
    text = out.getvalue()
    assert "imported 'weekday report' (new): 30 7 * * 1-5 tests.jobsapp.jobs.tracked" in text
    assert "skipped 'sunrise'" in text and text.rstrip().endswith("2 imported, 5 skipped")


def test_without_django_celery_beat_it_says_what_to_install(db: None, settings: Any) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django_celery_beat"]
    with pytest.raises(CommandError, match="add 'django_celery_beat' to INSTALLED_APPS"):
        call_command("wurk_import_celery_beat")
