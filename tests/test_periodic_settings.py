"""``WURK["PERIODIC"]`` (and ``LEADER``, ``LEADER_TTL``): read, checked per entry, installed.

Every bad entry is reported by ``manage.py check`` with its index and job (E003), and stops
``runwurk`` at start-up with the setting's name.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_wurk import ConfigError, Wurk
from django_wurk.conf import Settings, build_settings, setting_names
from django_wurk.core.registry import registry
from django_wurk.periodic import entry_problems, find_job, install_from_settings, loop_specs, parse_entries
from tests.jobsapp import jobs

GOOD = [
    {
        "cron": "*/5 * * * *",
        "job": "tests.jobsapp.jobs.echo",
        "args": [30],
        "queue": "low",
        "tz": "Europe/Berlin",
    },
    {"cron": "@daily", "job": "tests.jobsapp.jobs.critical", "args": ["nightly"], "retry": 2},
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in setting_names():
        monkeypatch.delenv(f"WURK_{name}", raising=False)
        monkeypatch.delenv(f"WURK_{name}_FILE", raising=False)


def periodic_errors(entries: Any) -> list[str]:
    with override_settings(WURK={"PERIODIC": entries}):
        return [m.msg for m in run_checks(tags=["wurk"]) if m.id.startswith("django_wurk.E")]


def test_the_issue_s_example_shape_is_read_and_becomes_loops() -> None:
    with override_settings(WURK={"PERIODIC": GOOD}):
        settings = build_settings(environ={})
    assert [e.cron for e in settings.periodic] == ["*/5 * * * *", "@daily"]
    assert periodic_errors(GOOD) == []
    echo, critical = loop_specs(settings.periodic, registry)
    assert echo.job_class is jobs.echo.job_class and echo.tz.key == "Europe/Berlin"
    assert echo.payload()["queue"] == "low" and echo.payload()["args"] == [30]
    # The job class's own options, with the entry's overrides on top.
    assert critical.payload()["queue"] == "critical" and critical.payload()["retry"] == 2
    assert critical.payload()["tags"] == ["alpha"] and critical.tz.key == "UTC"
    assert echo.source == "WURK['PERIODIC'] entry 0 (job 'tests.jobsapp.jobs.echo')"


def test_a_job_is_found_by_wire_name_or_dotted_path_and_only_if_registered() -> None:
    assert find_job("tests.jobsapp.jobs.echo", registry) is jobs.echo.job_class
    named = next(n for n in registry.names() if registry.resolve(n).__qualname__ != n.rsplit(".", 1)[-1])  # type: ignore[union-attr]
    job_class = registry.resolve(named)
    assert job_class is not None
    assert find_job(f"{job_class.__module__}.{job_class.__qualname__}", registry) is job_class
    assert find_job("os.system", registry) is None


def test_the_environment_gives_the_list_as_json() -> None:
    built = build_settings(
        environ={"WURK_PERIODIC": json.dumps(GOOD), "WURK_LEADER": "false", "WURK_LEADER_TTL": "5"}
    )
    assert len(built.periodic) == 2 and built.leader is False and built.leader_ttl == 5.0
    with pytest.raises(ConfigError, match=r"WURK\['PERIODIC'\]: must be a list .*not JSON"):
        build_settings(environ={"WURK_PERIODIC": "[{"})


BAD = [
    (
        {"cron": "*/61 * * * *", "job": "tests.jobsapp.jobs.echo"},
        "entry 0 (job 'tests.jobsapp.jobs.echo'): bad cron",
    ),
    ({"cron": "* * * *", "job": "tests.jobsapp.jobs.echo"}, "bad cron '* * * *'"),
    ({"cron": "@daily", "job": "no.such.job"}, "entry 0 (job 'no.such.job'): no registered job"),
    ({"cron": "@daily", "job": "os.system"}, "no registered job is named 'os.system'"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "tz": "Mars/Olympus"}, "bad tz"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "tz": 5}, "bad tz"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "every": 5}, "unknown key(s) 'every'"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "args": "x"}, "'args' must be a list"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "args": [{1, 2}]}, "JSON-native"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "queue": "a b"}, "queue 'a b'"),
    ({"cron": "@daily", "job": "tests.jobsapp.jobs.echo", "retry": -2}, "retry must be"),
    ({"cron": "@daily"}, "entry 0: 'job' is required"),
    ({"job": "tests.jobsapp.jobs.echo"}, "'cron' is required"),
    ({"cron": 5, "job": "tests.jobsapp.jobs.echo"}, "'cron' is required and must be a non-empty string"),
    ("@daily tests.jobsapp.jobs.echo", "entry 0 must be a dict"),
]


@pytest.mark.parametrize(("entry", "message"), BAD, ids=[m for _, m in BAD])
def test_check_names_each_bad_entry(entry: Any, message: str) -> None:
    [error] = periodic_errors([entry, GOOD[0]])
    assert error.startswith("WURK['PERIODIC']: ") and message in error


def test_check_reports_every_bad_entry_by_its_index() -> None:
    entries = [
        GOOD[0],
        {"cron": "bad", "job": "tests.jobsapp.jobs.echo"},
        GOOD[1],
        {"cron": "@daily", "job": "nope"},
    ]
    errors = periodic_errors(entries)
    assert len(errors) == 2
    assert "entry 1 (job 'tests.jobsapp.jobs.echo'): bad cron 'bad'" in errors[0]
    assert "entry 3 (job 'nope'): no registered job" in errors[1]
    # Without the registry (settings being built), only the shape, cron and tz are checked.
    assert len(entry_problems(entries)) == 1


def test_an_entry_whose_arguments_the_job_cannot_take_is_refused_by_check_and_at_start() -> None:
    entries = [GOOD[0], {"cron": "@daily", "job": "tests.jobsapp.jobs.critical", "kwargs": {"y": 1}}]
    [error] = periodic_errors(entries)
    assert (
        "entry 1 (job 'tests.jobsapp.jobs.critical')" in error and "missing a required argument: 'x'" in error
    )
    with pytest.raises(ConfigError, match=r"entry 1 .*missing a required argument: 'x'"):
        loop_specs(parse_entries("PERIODIC", entries), registry)


@pytest.mark.parametrize("value", [{"cron": "@daily"}, "@daily", 5])
def test_periodic_must_be_a_list(value: Any) -> None:
    [error] = periodic_errors(value)
    assert "must be a list of entries" in error


def test_a_bad_leader_ttl_names_its_setting() -> None:
    with pytest.raises(ConfigError, match=r"WURK\['LEADER_TTL'\]: must be greater than 0"):
        Settings(leader_ttl=0)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{"cron": "@daily", "job": "nope"}],
            r"WURK\['PERIODIC'\]: entry 0 \(job 'nope'\): no registered job",
        ),
        (
            [{"cron": "61 * * * *", "job": "tests.jobsapp.jobs.echo"}],
            r"WURK\['PERIODIC'\]: entry 0 .*bad cron",
        ),
    ],
)
def test_runwurk_refuses_to_start_on_a_bad_entry(entries: Any, message: str, use_app_settings: Any) -> None:
    with override_settings(WURK={"PERIODIC": entries}), pytest.raises(CommandError, match=message):
        call_command("runwurk", skip_checks=True)


def test_install_from_settings_follows_leader(wurk: Wurk) -> None:
    entries = build_settings(environ={"WURK_PERIODIC": json.dumps(GOOD)}).periodic
    install_from_settings(wurk, entries, leader=False, ttl=30)
    assert wurk.feature("leader") is None and wurk.feature("periodic") is None
    install_from_settings(wurk, entries, leader=True, ttl=30)
    assert wurk.feature("leader") is not None and wurk.feature("periodic") is not None
