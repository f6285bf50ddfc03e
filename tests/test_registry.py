"""The registry (``django_wurk.core.registry``): one job class per wire name, and a clash
reported by ``manage.py check`` rather than breaking an import."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management.base import SystemCheckError

from django_wurk import Job
from django_wurk.core.registry import registry
from tests.test_conf import every_database, run

pytestmark = pytest.mark.usefixtures("clean_environment")


@every_database
def test_duplicate_wire_names_fail_at_definition_and_in_check() -> None:
    name = "testing.conf.duplicate"

    class First(Job):
        wire_name = name

    try:

        class Second(Job):  # the import goes on; the check below stops a worker from starting
            wire_name = name

        assert registry.resolve(name) is First  # the first one keeps the name
        assert list(registry.duplicates()) == [name]
        [message] = [m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E002"]
        assert name in message.msg and "First" in message.msg and "Second" in message.msg
        with pytest.raises(SystemCheckError) as check:
            run()
        assert "django_wurk.E002" in str(check.value) and name in str(check.value)
    finally:
        registry.unregister(name)
    assert registry.resolve(name) is None and name not in registry.duplicates()
    assert "no issues" in run()[0]


def test_redefining_the_same_job_path_is_not_a_duplicate() -> None:
    name = "testing.conf.reloaded"

    def define() -> type[Job]:
        class Reloaded(Job):  # same module and qualname each time, as after an autoreload
            wire_name = name

        return Reloaded

    try:
        first, second = define(), define()
        assert first is not second and registry.resolve(name) is second
        assert name not in registry.duplicates()
    finally:
        registry.unregister(name)


def test_a_job_no_worker_imports_is_named_by_check_with_where_to_move_it() -> None:
    """W005: defined where only a web process looks (a views module here), a job enqueues fine
    and fails on every worker with UnknownJobError; ``check`` names it and its app's jobs module."""
    views_job = type("Receipt", (Job,), {"__module__": "tests.jobsapp.views", "perform": lambda self: None})

    class Loose(Job):  # in a test module, which belongs to no installed app
        def perform(self) -> None:
            pass

    try:
        warnings = {m.msg.split("'")[1]: m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.W005"}
        receipt = warnings["tests.jobsapp.views.Receipt"]
        assert "defined in tests.jobsapp.views, which runwurk does not import" in receipt.msg
        assert receipt.hint is not None and receipt.hint.startswith(
            "Move it to tests.jobsapp.jobs, or import tests.jobsapp.views from there"
        )
        loose = warnings[f"{__name__}.{Loose.__qualname__}"]
        assert loose.hint is not None and "Move it to the jobs module of one of your apps" in loose.hint
        # Every job the jobs modules define (and what they import) is known to a worker.
        assert not any(name.startswith("tests.jobsapp.jobs.") for name in warnings)
        assert "tests.jobsapp.jobs.echo" in registry.names()
    finally:
        registry.unregister(views_job.wire_name)
        registry.unregister(Loose.wire_name)
