"""Periodic schedules edited at run time: the ``Schedule`` model, its admin, and the leader.

The engine asks a loop source again every few seconds (``ticker.py``) and registers what is
new and prunes what is gone; the Django app's source reads the enabled rows
(``django_wurk.schedules``). The admin refuses a row that could not run and logs every
change; a row made bad behind its back is skipped with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from django_wurk import Wurk
from django_wurk.api import LoopSet
from django_wurk.core.features.periodic import features, keys
from django_wurk.core.features.periodic.cron import Cron
from django_wurk.core.features.periodic.loops import LoopSpec
from django_wurk.core.features.periodic.ticker import Ticker
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from django_wurk.models import Schedule
from django_wurk.periodic import parse_entries
from django_wurk.schedules import ScheduleSource, loop_spec
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.test_periodic import T0, EveryMinutes, queued, spec

TRACKED = "tests.jobsapp.jobs.tracked"


def schedule(name: str = "nightly", **fields: Any) -> Schedule:
    values: dict[str, Any] = {"cron": "*/5 * * * *", "job": TRACKED, "args": [1], "kwargs": {"seconds": 0.0}}
    values.update(fields)
    return Schedule.objects.create(name=name, **values)


# --- the engine: a loop source ------------------------------------------------------------


def test_the_ticker_registers_what_a_source_adds_and_prunes_what_it_drops(wurk: Wurk, r: Any) -> None:
    fixed = spec(args=("fixed",))
    added = LoopSpec(EveryMinutes(), jobs.tracked.job_class, args=(5,), kwargs={"seconds": 0.5})
    given: list[LoopSpec] = []
    ticker = Ticker(wurk, [fixed], source=lambda: list(given), refresh=0.0)
    ticker.take_office(T0)
    assert r.smembers(keys.PERIODIC) == {fixed.lid.encode()}
    given.append(added)
    ticker.tick(T0 + 1)
    assert r.smembers(keys.PERIODIC) == {fixed.lid.encode(), added.lid.encode()}
    # Both fire on the clock; the added one with its keyword arguments.
    assert len(ticker.tick(T0 + 60.5)) == 2
    assert sorted((j["class"], j["args"], j.get("kwargs")) for j in queued(r)) == [
        ("tests.jobsapp.jobs.echo", ["fixed"], None),
        (TRACKED, [5], {"seconds": 0.5}),
    ]
    given.clear()
    ticker.tick(T0 + 61)
    assert r.smembers(keys.PERIODIC) == {fixed.lid.encode()} and not r.exists(keys.loop(added.lid))


def test_a_source_that_fails_keeps_the_loops_it_gave_last_and_says_so_once(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    loop = spec(args=("db",))
    failing = [False]

    def source() -> list[LoopSpec]:
        if failing[0]:
            raise ConnectionError("database is down")
        return [loop]

    ticker = Ticker(wurk, [], source=source, refresh=0.0)
    ticker.take_office(T0)
    failing[0] = True
    with caplog.at_level(logging.WARNING, logger="django_wurk.periodic"):
        for second in range(1, 4):
            ticker.tick(T0 + second)
        fired = ticker.tick(T0 + 60.5)
    assert [f.lid for f in fired] == [loop.lid]
    warnings = [r for r in caplog.records if "could not read the loops" in r.getMessage()]
    assert len(warnings) == 1 and "database is down" in warnings[0].getMessage()


def test_a_kwargs_loop_keeps_the_lid_of_one_without_them() -> None:
    """Loops without keyword arguments keep the lid they had before ``kwargs`` existed."""

    def tracked(**kwargs: Any) -> LoopSpec:
        return LoopSpec(EveryMinutes(), jobs.tracked.job_class, args=(1,), **kwargs)

    plain = tracked()
    assert plain.lid == tracked(kwargs={}).lid != tracked(kwargs={"seconds": 1}).lid
    assert "kwargs" not in plain.options


def test_a_loop_the_job_could_not_take_is_refused_when_it_is_made() -> None:
    with pytest.raises(
        TypeError, match=r"tests\.jobsapp\.jobs\.echo: got an unexpected keyword argument 'n'"
    ):
        spec(kwargs={"n": 1})


# --- the glue: Schedule rows as loops ------------------------------------------------------


def test_enabled_rows_become_loops_with_their_fields(db: None) -> None:
    schedule("a", queue="low", tz="Europe/Paris", args=[3], kwargs={"seconds": 0.5})
    schedule("b", enabled=False)
    [loop] = ScheduleSource(registry)()
    assert (loop.klass, loop.args, dict(loop.kwargs), loop.queue, loop.tz.key) == (
        TRACKED,
        (3,),
        {"seconds": 0.5},
        "low",
        "Europe/Paris",
    )
    assert loop.expression == Cron.parse("*/5 * * * *").expression and loop.source == "schedule 'a'"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"cron": "61 * * * *"}, "cron: not a cron expression"),
        ({"job": "no.such.job"}, "job: no registered job is named 'no.such.job'"),
        ({"args": "not a list"}, "args: must be a JSON list"),
        ({"args": {"a": 1}}, "args: must be a JSON list"),
        ({"kwargs": [1]}, "kwargs: must be a JSON object"),
        ({"kwargs": {"nope": 1}}, "got an unexpected keyword argument 'nope'"),
        ({"args": []}, "missing a required argument: 'n'"),
        ({"tz": "Mars/Olympus_Mons"}, "tz:"),
        ({"queue": "no spaces allowed"}, "queue: 'no spaces allowed' is not a queue name"),
    ],
)
def test_a_row_made_bad_behind_the_admins_back_is_skipped_with_one_warning(
    db: None, caplog: pytest.LogCaptureFixture, change: dict[str, Any], says: str
) -> None:
    good = schedule("good")
    bad = schedule("bad", args=[2])
    Schedule.objects.filter(pk=bad.pk).update(**change)  # no clean(): what SQL or a script does
    source = ScheduleSource(registry)
    with caplog.at_level(logging.WARNING, logger="django_wurk.periodic"):
        for _ in range(3):
            loops = source()
            assert [loop.source for loop in loops] == ["schedule 'good'"]
    warnings = [r.getMessage() for r in caplog.records if "is skipped" in r.getMessage()]
    assert len(warnings) == 1 and "schedule 'bad'" in warnings[0] and says in warnings[0], warnings
    assert good.enabled


def test_the_ticker_fires_a_schedule_with_its_keyword_arguments(
    db: None, wurk: Wurk, r: Any, use_app_settings: Any
) -> None:
    use_app_settings(enqueue="immediate")  # the test's transaction is never committed
    schedule("five", cron="*/5 * * * *", args=[7], kwargs={"seconds": 0.25}, queue="low")
    ticker = Ticker(wurk, [], source=ScheduleSource(registry), refresh=0.0)
    ticker.take_office(T0)
    assert ticker.tick(T0 + 299) == [] and len(ticker.tick(T0 + 300.5)) == 1
    [job] = queued(r, "low")
    assert (job["class"], job["args"], job["kwargs"]) == (TRACKED, [7], {"seconds": 0.25})


@pytest.fixture
def leader(wurk: Wurk) -> Iterator[Launcher]:
    """A worker process whose periodic service reads the Schedule table every 0.2 s."""
    wurk.use(*features([], ttl=5.0, source=ScheduleSource(registry), refresh=0.2))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        wurk.drop("leader", "periodic")


def test_a_running_leader_picks_up_an_added_edited_and_disabled_schedule(
    transactional_db: None, wurk: Wurk, r: Any, leader: Launcher
) -> None:
    def registered() -> set[str]:
        return {loop.lid for loop in LoopSet(wurk)}

    row = schedule("live", cron="*/5 * * * *", args=[1])
    first = loop_spec(row, registry).lid
    wait_for(lambda: registered() == {first})
    row.cron = "*/10 * * * *"
    row.save()
    second = loop_spec(row, registry).lid
    assert second != first
    wait_for(lambda: registered() == {second})
    row.enabled = False
    row.save()
    wait_for(lambda: registered() == set())


# --- the admin -----------------------------------------------------------------------------


def admin_user(*codenames: str) -> Client:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="django_wurk")
        )
    client = Client()
    client.force_login(User.objects.get(pk=user.pk))
    return client


FORM = {"name": "reports", "cron": "0 7 * * 1-5", "job": TRACKED, "args": "[3]",
        "kwargs": '{"seconds": 1.5}', "queue": "", "tz": "Europe/Berlin", "enabled": "on"}  # fmt: skip


def test_the_admin_adds_changes_and_deletes_schedules_and_logs_each(db: None) -> None:
    client = admin_user("add_schedule", "change_schedule", "delete_schedule", "view_schedule")
    add = reverse("admin:django_wurk_schedule_add")
    assert client.post(add, FORM).status_code == 302
    row = Schedule.objects.get(name="reports")
    assert (row.args, row.kwargs, row.tz) == ([3], {"seconds": 1.5}, "Europe/Berlin")
    change = reverse("admin:django_wurk_schedule_change", args=[row.pk])
    assert client.post(change, {**FORM, "cron": "0 8 * * 1-5"}).status_code == 302
    changelist = reverse("admin:django_wurk_schedule_changelist")
    response = client.post(changelist, {"action": "disable", "_selected_action": [row.pk]})
    assert response.status_code == 302 and not Schedule.objects.get(pk=row.pk).enabled
    delete = reverse("admin:django_wurk_schedule_delete", args=[row.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Schedule.objects.exists()
    log = LogEntry.objects.filter(object_id=str(row.pk)).order_by("id")
    assert [e.action_flag for e in log] == [ADDITION, CHANGE, CHANGE, DELETION]
    assert "Cron" in log[1].get_change_message() and "enabled" in log[2].get_change_message()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("cron", "0 25 * * *", "not a cron expression"),
        ("job", "tests.jobsapp.jobs.nope", "no registered job"),
        ("args", "[3", "Enter a valid JSON"),
        ("args", '{"n": 3}', "must be a JSON list"),
        ("kwargs", '["x"]', "must be a JSON object"),
        ("kwargs", '{"speed": 1}', "unexpected keyword argument &#x27;speed&#x27;"),
        ("tz", "Europe/Atlantis", "Europe/Atlantis"),
        ("queue", "a b", "is not a queue name"),
    ],
)
def test_the_admin_refuses_a_schedule_that_could_not_run(db: None, field: str, value: str, says: str) -> None:
    client = admin_user("add_schedule", "view_schedule")
    response = client.post(reverse("admin:django_wurk_schedule_add"), {**FORM, field: value})
    assert response.status_code == 200 and says in response.content.decode()
    assert not Schedule.objects.exists()


def test_schedules_need_their_model_permissions(db: None) -> None:
    viewer = admin_user("view_schedule")
    assert viewer.get(reverse("admin:django_wurk_schedule_changelist")).status_code == 200
    assert viewer.post(reverse("admin:django_wurk_schedule_add"), FORM).status_code == 403
    assert not Schedule.objects.exists()
    nobody = admin_user()
    assert nobody.get(reverse("admin:django_wurk_schedule_changelist")).status_code == 403


def test_the_changelist_shows_the_settings_loops_read_only(db: None, use_app_settings: Any) -> None:
    entries = [{"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "args": ["<b>x</b>"]}]
    use_app_settings(periodic=parse_entries("PERIODIC", entries))
    page = admin_user("view_schedule").get(reverse("admin:django_wurk_schedule_changelist")).content.decode()
    section = page.split('id="wurk-settings-schedules"')[1]
    assert "Defined in settings (read-only)" in section and "@daily" in section
    assert "&quot;&lt;b&gt;x&lt;/b&gt;&quot;" in section and "<b>x</b>" not in section
    # Read-only: nothing links to a change form for them.
    assert "/change/" not in section
