"""CELERY_BEAT_SCHEDULE as periodic-job entries: what maps, and what is reported instead."""

from __future__ import annotations

import types
from datetime import UTC, datetime, timedelta

import pytest
from celery import schedules as celery_schedules

from django_wurk.celery import Celery
from django_wurk.celery.schedules import crontab, periodic_entries


@pytest.mark.parametrize("crontab_class", [crontab, celery_schedules.crontab], ids=["ours", "celery"])
def test_crontab_fields_in_crons_order(crontab_class: type) -> None:
    schedule = {
        "every": {"task": "t.a", "schedule": crontab_class()},
        "quarter": {"task": "t.b", "schedule": crontab_class(minute="*/15")},
        "weekdays": {"task": "t.c", "schedule": crontab_class(minute=0, hour=9, day_of_week="mon-fri")},
        "quarterly": {"task": "t.d", "schedule": crontab_class(0, 0, month_of_year="*/3", day_of_month=1)},
        "hours": {"task": "t.e", "schedule": crontab_class(minute=0, hour="*/3,8-17")},
    }
    crons = [e["cron"] for e in periodic_entries(schedule).entries]
    assert crons == ["* * * * *", "*/15 * * * *", "0 9 * * 1-5", "0 0 1 */3 *", "0 */3,8-17 * * *"]


class solar:
    pass


def test_intervals_that_divide_an_hour_or_a_day_map_the_rest_are_reported() -> None:
    schedule = {
        "5m": {"task": "t.a", "schedule": timedelta(minutes=5)},
        "1h": {"task": "t.a", "schedule": 3600},
        "6h": {"task": "t.a", "schedule": timedelta(hours=6)},
        "1d": {"task": "t.a", "schedule": timedelta(days=1)},
        "7m": {"task": "t.a", "schedule": timedelta(minutes=7)},
        "30s": {"task": "t.a", "schedule": 30.0},
        "solar": {"task": "t.a", "schedule": solar()},
        "kwargs": {"task": "t.a", "schedule": 60, "kwargs": {"a": 1}},
    }
    result = periodic_entries(schedule)
    crons = ["*/5 * * * *", "0 * * * *", "0 */6 * * *", "0 0 * * *", "* * * * *"]
    assert [e["cron"] for e in result.entries] == crons
    # Keyword arguments carry over (the payload's kwargs, docs/jobs.md).
    assert result.entries[-1]["kwargs"] == {"a": 1}
    assert set(result.skipped) == {"7m", "30s", "solar"}
    assert "divide" in result.skipped["7m"] and "seconds" in result.skipped["30s"]
    assert "aligned to the clock" in result.notes["5m"][0]


def test_arguments_queue_timezone_and_dropped_options() -> None:
    app = Celery("proj")
    app.config_from_object(types.SimpleNamespace(
        CELERY_TIMEZONE="Europe/Berlin",
        CELERY_BEAT_SCHEDULE={"report": {"task": "proj.report", "schedule": crontab(minute=0, hour=7),
                                         "args": (datetime(2026, 1, 1, tzinfo=UTC), 3),
                                         "options": {"queue": "low", "expires": 60}}},
    ), namespace="CELERY")  # fmt: skip
    result = app.periodic_entries()
    assert result.entries == [{
        "cron": "0 7 * * *", "job": "proj.report", "queue": "low", "tz": "Europe/Berlin",
        "args": [{"__type__": "datetime", "__value__": "2026-01-01T00:00:00+00:00"}, 3],
    }]  # fmt: skip
    assert result.notes == {"report": ["options dropped: expires"]}


def test_both_day_fields_are_noted() -> None:
    result = periodic_entries(
        {"odd": {"task": "t", "schedule": crontab(0, 0, day_of_week=1, day_of_month=1)}}
    )
    assert result.entries[0]["cron"] == "0 0 1 * 1" and "either" in result.notes["odd"][0]


def test_what_the_cron_parser_refuses_is_skipped_with_its_reason() -> None:
    result = periodic_entries({
        "typo": {"task": "t", "schedule": crontab(minute=75)},
        "feb30": {"task": "t", "schedule": crontab(minute=0, hour=0, day_of_month=30, month_of_year=2)},
        "day": {"task": "t", "schedule": crontab(day_of_week="someday")},
    })  # fmt: skip
    assert result.entries == [] and set(result.skipped) == {"typo", "feb30", "day"}
    assert (
        periodic_entries({"x": {"task": "t", "schedule": 60}}, timezone="Mars/Base")
        .skipped["x"]
        .startswith("unknown time zone")
    )


def test_manage_check_names_each_beat_entry_left_out_and_each_not_imported() -> None:
    from django.test import override_settings

    from django_wurk.checks import check_celery_beat

    schedule = {
        "imported": {"task": "t.a", "schedule": crontab(minute=0)},
        "uneven": {"task": "t.b", "schedule": timedelta(minutes=7)},
        "forgotten": {"task": "t.c", "schedule": timedelta(minutes=5)},
    }
    imported = periodic_entries({"imported": schedule["imported"]}).entries
    with override_settings(CELERY_BEAT_SCHEDULE=schedule, WURK={"PERIODIC": imported}):
        found = {(m.id, m.msg.split("'")[1]) for m in check_celery_beat()}
    assert found == {
        ("django_wurk.W003", "uneven"),
        ("django_wurk.W004", "forgotten"),
        ("django_wurk.I002", "forgotten"),  # an interval aligned to the clock
    }
    with override_settings(CELERY_BEAT_SCHEDULE={}):
        assert check_celery_beat() == []
