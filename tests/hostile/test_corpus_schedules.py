"""The bad-data corpus against the ``Schedule`` table the leader reads every few seconds.

A row written behind the admin's back (SQL, a script, a job renamed in a deploy) can hold
anything its columns allow. The leader's source (``django_wurk.schedules.ScheduleSource``)
must skip each such row with exactly one warning, keep every good row, never raise, and
never stop the ticker from firing the good ones.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from django_wurk import Wurk
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.ticker import Ticker
from django_wurk.core.registry import registry
from django_wurk.models import Schedule
from django_wurk.schedules import ScheduleSource

T0 = 1577836800.0  # 2020-01-01T00:00:00Z: in the past, so Redis agrees occurrences are due
GOOD = {"cron": "* * * * *", "job": "tests.jobsapp.jobs.echo", "args": ["good"], "kwargs": {}}


def deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


#: Column values no schedule can run with, set through the ORM (no ``clean()``).
BAD_VALUES: list[tuple[str, dict[str, Any]]] = [
    ("empty cron", {"cron": ""}),
    ("six-field cron", {"cron": "* * * * * *"}),
    ("cron of 200 characters", {"cron": "1," * 99 + "1"}),
    ("cron @reboot", {"cron": "@reboot"}),
    ("step 0", {"cron": "*/0 * * * *"}),
    ("empty job", {"job": ""}),
    ("job os.system", {"job": "os.system"}),
    ("job with a trailing space", {"job": "tests.jobsapp.jobs.echo "}),
    ("job of 300 characters", {"job": "j" * 300}),
    ("args a string", {"args": "[1]"}),
    ("args a number", {"args": 5}),
    ("args an object", {"args": {"a": 1}}),
    ("kwargs a list", {"kwargs": [1]}),
    ("kwargs for a job without keywords", {"kwargs": {"a": 1}}),
    ("kwargs with an empty key", {"kwargs": {"": 1}}),
    ("args nested 120 deep", {"args": deep(120)}),
    ("tz unknown", {"tz": "Mars/Olympus_Mons"}),
    ("tz a path", {"tz": "../../etc/passwd"}),
    ("queue with spaces", {"queue": "a b"}),
    ("queue of 200 characters", {"queue": "q" * 199 + "!"}),
]
#: JSON text written with SQL. Each database refuses some of it on write (SQLite checks
#: ``JSON_VALID``; PostgreSQL's jsonb refuses lone surrogates): what it accepts is in the corpus.
RAW_ARGS: list[tuple[str, str]] = [
    ("args not JSON", "[1,"),
    ("args NaN", "[NaN]"),
    ("args nested 900 deep", "[" * 900 + "]" * 900),
    ("args a lone surrogate", '["\\ud800"]'),
]
#: Odd values a schedule can run with: kept, fired like any other.
ODD_BUT_RUNNABLE: list[tuple[str, dict[str, Any]]] = [
    ("cron with a line separator", {"cron": "*\u2028* * * *"}),
    (
        "an object that looks like a type tag",
        {"args": [{"__class__": "set"}], "job": "tests.jobsapp.jobs.critical"},
    ),
    ("a 400-digit integer", {"args": [int("9" * 400)]}),
    ("name of 200 characters, markup", {"name": "<b>" + "n" * 190 + "</b>", "args": ["named"]}),
]


@pytest.fixture
def rows(db: None) -> dict[str, int]:
    """One good row, and one bad row per corpus member; ``{name: pk}``."""
    made = {"good": Schedule.objects.create(name="good", **GOOD).pk}
    for name, change in [*BAD_VALUES, *ODD_BUT_RUNNABLE]:
        row = Schedule.objects.create(name=name, **GOOD)
        Schedule.objects.filter(pk=row.pk).update(**change)
        made[change.get("name", name)] = row.pk
    for name, raw in RAW_ARGS:
        row = Schedule.objects.create(name=name, **GOOD)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("UPDATE django_wurk_schedule SET args = %s WHERE id = %s", [raw, row.pk])
        except DatabaseError:
            row.delete()  # this database cannot hold it: not part of its corpus
            continue
        made[name] = row.pk
    return made


def test_every_bad_row_is_skipped_with_one_warning_and_the_good_one_fires(
    rows: dict[str, int], wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture, use_app_settings: Any
) -> None:
    use_app_settings(enqueue="immediate")  # the test's transaction is never committed
    runnable = {"good", *(change.get("name", name) for name, change in ODD_BUT_RUNNABLE)}
    source = ScheduleSource(registry)
    with caplog.at_level(logging.WARNING, logger="django_wurk.periodic"):
        for _ in range(3):
            assert sorted(loop.source for loop in source()) == sorted(f"schedule {n!r}" for n in runnable)
        ticker = Ticker(wurk, [], source=source, refresh=0.0)
        ticker.take_office(T0)
        fired = ticker.tick(T0 + 60.5)
    warned = [rec.getMessage() for rec in caplog.records if "is skipped" in rec.getMessage()]
    bad = set(rows) - runnable
    # One warning per bad row however often the table is read, each naming its row.
    assert len(warned) == len(bad), warned
    for name in bad:
        assert sum(f"(id {rows[name]})" in w for w in warned) == 1, name
    assert len(fired) == len(runnable) and r.scard(keys.PERIODIC) == len(runnable)
    pushed = r.lrange("queue:default", 0, -1) + r.lrange("queue:critical", 0, -1)
    assert len(pushed) == len(runnable) and any(b'"args":["good"]' in raw for raw in pushed)
