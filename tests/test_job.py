"""Jobs (``django_wurk.core.job``): options, ``set(...)``, the ``perform_*`` verbs and ``@job``.

A job's options are checked when its class is defined and written into its payload as
Sidekiq's ``sidekiq_options`` are; the bytes a push writes are tested in test_client.py.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Job, Wurk, job
from tests.conftest import queue_entries
from tests.jobsapp import jobs


def test_class_options_are_written_like_sidekiq_options(wurk: Wurk, r: Any) -> None:
    jobs.critical.perform_async("x")
    [payload] = queue_entries(r, "critical")
    # Ruby's CriticalJob (sidekiq_options queue: "critical", retry: 5, backtrace: 3, tags: ["alpha"]).
    assert list(payload)[:6] == ["retry", "queue", "backtrace", "tags", "args", "class"]
    assert (payload["retry"], payload["queue"], payload["backtrace"], payload["tags"]) == (
        5,
        "critical",
        3,
        ["alpha"],
    )


def test_set_overrides_options_and_carries_unknown_ones(wurk: Wurk, r: Any) -> None:
    jobs.echo.set(queue="low", retry=False, tags=["t"], locale="fr").perform_async(7)
    [payload] = queue_entries(r, "low")
    assert payload["queue"] == "low" and payload["retry"] is False
    assert payload["tags"] == ["t"] and payload["locale"] == "fr"
    assert r.smembers("queues") == {b"low"}


def test_perform_in_accepts_timedelta_and_absolute_epochs(wurk: Wurk, r: Any) -> None:
    jobs.echo.perform_in(timedelta(minutes=5), 1)
    absolute = time.time() + 7200
    jobs.echo.perform_in(absolute, 2)  # >= 1e9: an epoch, as in Sidekiq
    scores = sorted(s for _, s in r.zrange("schedule", 0, -1, withscores=True))
    assert scores[0] == pytest.approx(time.time() + 300, abs=5)
    assert scores[1] == pytest.approx(absolute, abs=0.001)


def test_already_due_jobs_go_straight_to_the_queue(wurk: Wurk, r: Any) -> None:
    jobs.echo.perform_in(0, "now")
    jobs.echo.perform_at(time.time() - 60, "past")
    assert r.zcard("schedule") == 0
    assert [p["args"] for p in queue_entries(r)] == [["past"], ["now"]]
    assert all("enqueued_at" in p for p in queue_entries(r))


def test_perform_at_needs_an_aware_datetime(wurk: Wurk, r: Any) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    jobs.echo.perform_at(when, 1)
    [(_, score)] = r.zrange("schedule", 0, -1, withscores=True)
    assert score == pytest.approx(when.timestamp())
    with pytest.raises(ValueError, match="aware datetime"):
        jobs.echo.perform_at(datetime.now() + timedelta(hours=1), 1)


def test_non_json_arguments_are_refused_at_enqueue(wurk: Wurk, r: Any) -> None:
    with pytest.raises(TypeError, match=r"args\[1\] is a datetime.datetime"):
        jobs.echo.perform_async(1, datetime.now(UTC))
    assert r.llen("queue:default") == 0


def test_calling_a_function_job_runs_it_directly(wurk: Wurk, r: Any) -> None:
    jobs.echo("direct")
    assert r.lrange("seen:echo", 0, -1) == [b'["direct"]']
    assert r.llen("queue:default") == 0


def test_perform_inline_uses_json_round_trip_and_server_middleware(wurk: Wurk, r: Any) -> None:
    calls: list[str] = []

    class Around:
        def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
            calls.append(f"{type(job).__name__}:{payload['jid'] == job.jid}")
            call_next()

    wurk.server_middleware.add(Around)
    assert jobs.PlainJob.perform_inline(1, (2, 3)) == 2
    assert r.lrange("seen:PlainJob", 0, -1) == [b"[1, [2, 3]]"]  # the tuple arrived as a list
    assert calls == ["PlainJob:True"]


def test_job_options_are_validated_when_defined() -> None:
    with pytest.raises(ValueError, match="queue"):

        class BadQueue(Job, abstract=True):
            queue = "no spaces allowed"

    with pytest.raises(ValueError, match="retry must be"):

        class BadRetry(Job):
            wire_name = "BadRetry"
            retry = -1

    with pytest.raises(ValueError, match="module-level"):

        @job
        def nested() -> None: ...

    with pytest.raises(ValueError, match="'jid' cannot be set"):
        jobs.echo.set(jid="x")


def test_wire_name_defaults_to_the_dotted_path() -> None:
    assert jobs.echo.wire_name == "tests.jobsapp.jobs.echo"
    assert jobs.PlainJob.wire_name == "PlainJob"
    from django_wurk.core.registry import registry

    assert registry.resolve("tests.jobsapp.jobs.echo") is jobs.echo.job_class
    assert registry.resolve("os.system") is None


def first_mailer() -> None: ...


def second_mailer() -> None: ...


def test_a_decorator_reused_gives_every_function_the_same_options(wurk: Wurk, r: Any) -> None:
    mailer = job(queue="mailers", retry=5, tags=["mail"], vendor_option="kept")
    first, second = mailer(first_mailer), mailer(second_mailer)
    for fn in (first, second):
        assert fn.job_class.set().options == {
            "queue": "mailers",
            "retry": 5,
            "tags": ["mail"],
            "vendor_option": "kept",
        }, fn
        fn.perform_async()
    assert [(e["class"], e["retry"], e["vendor_option"]) for e in reversed(queue_entries(r, "mailers"))] == [
        ("tests.test_job.first_mailer", 5, "kept"),
        ("tests.test_job.second_mailer", 5, "kept"),
    ]


def test_a_feature_declared_job_option_is_checked_and_stored_in_the_payload(wurk: Wurk, r: Any) -> None:
    from django_wurk.core.feature import Feature, FeatureOrderError

    def check_colour(value: Any, where: str) -> str:
        if value not in ("red", "blue"):
            raise ValueError(f"{where}: colour must be red or blue, got {value!r}")
        return str(value).upper()

    wurk.use(Feature("colours", job_options={"colour": check_colour}))  # undone by the fixture
    with pytest.raises(ValueError, match="colour must be red or blue"):
        jobs.critical.set(colour="green")
    jobs.critical.set(colour="red").perform_async("x")
    [payload] = queue_entries(r, "critical")
    assert payload["colour"] == "RED"
    with pytest.raises(FeatureOrderError, match="is a job option or a payload key"):
        wurk.use(Feature("queues", job_options={"queue": check_colour}))
    with pytest.raises(FeatureOrderError, match="is another feature's already"):
        wurk.use(Feature("paint", job_options={"colour": check_colour}))
