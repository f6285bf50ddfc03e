"""The testing modes (``django_wurk.testing``) and the ``wurk_fake`` / ``wurk_inline`` fixtures.

The jobs here (tests/jobsapp/testing_jobs.py) record into memory, so apart from the tests that
prove nothing reaches Redis, none of these needs a server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Config, TimestampStyle, Wurk, testing
from django_wurk import wurk as global_wurk
from django_wurk.testing import FakeQueues, InlinePusher
from django_wurk.transaction import Transactions
from tests.jobsapp import testing_jobs
from tests.jobsapp.testing_jobs import SeesPayload, calls, chain, collect, explode, other


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    """Empty the call log and leave the global middleware chains as they were found."""
    calls.clear()
    with global_wurk.client_middleware.preserved(), global_wurk.server_middleware.preserved():
        yield
    calls.clear()


class DropArg:
    """Client middleware that drops any push whose first argument is ``"drop"``."""

    def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
        if payload["args"] and payload["args"][0] == "drop":
            return None
        payload["tagged_by"] = "DropArg"
        return call_next()


class Around:
    """Server middleware that logs around each execution."""

    def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
        calls.append(("before", (payload["class"], queue, job.jid == payload["jid"])))
        call_next()
        calls.append(("after", payload["class"]))


def names() -> list[str]:
    return [name for name, _ in calls]


# The plugin --------------------------------------------------------------------------


def test_fixtures_come_from_the_installed_pytest_plugin(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("django_wurk")
    assert plugin is not None and plugin.__name__ == "django_wurk.pytest_plugin"


def test_wurk_fake_swaps_the_pusher_only_while_in_use(wurk_fake: FakeQueues) -> None:
    assert global_wurk.pusher is wurk_fake
    assert isinstance(wurk_fake, FakeQueues) and wurk_fake.wurk is global_wurk


def test_wurk_inline_swaps_the_pusher_only_while_in_use(wurk_inline: None) -> None:
    assert isinstance(global_wurk.pusher, InlinePusher)


def test_context_managers_restore_the_pusher_even_after_an_error() -> None:
    before = global_wurk.pusher
    with pytest.raises(KeyError), testing.fake() as queues:
        assert global_wurk.pusher is queues
        raise KeyError("boom")
    assert global_wurk.pusher is before
    with pytest.raises(KeyError), testing.inline():
        assert isinstance(global_wurk.pusher, InlinePusher)
        raise KeyError("boom")
    assert global_wurk.pusher is before
    # Outside the testing modes the writer takes the pushes, and the Django app's rule
    # decides which of them wait for a transaction's commit.
    assert before is global_wurk.writer and before.writes_to_redis
    assert isinstance(global_wurk.deferral, Transactions)


# Fake mode: recording ------------------------------------------------------------------


def test_fake_records_each_push_per_job(wurk_fake: FakeQueues) -> None:
    before = time.time()
    jid = collect.perform_async(1, "two", {"three": 3.5}, None, True)
    jid2 = collect.perform_async(2)
    other.perform_async("x")
    assert calls == []  # recorded, not run
    first, second = wurk_fake.jobs_for(collect)
    assert first["jid"] == jid and second["jid"] == jid2 and jid != jid2
    assert len(jid or "") == 24
    assert first["class"] == "testing.collect"
    assert first["args"] == [1, "two", {"three": 3.5}, None, True]
    assert (first["queue"], first["retry"]) == ("default", True)
    assert isinstance(first["enqueued_at"], float) and before <= first["enqueued_at"] <= time.time()
    assert before <= first["created_at"] <= first["enqueued_at"]
    assert "at" not in first
    [o] = wurk_fake.jobs_for(other)
    assert (o["queue"], o["args"]) == ("low", ["x"])
    assert wurk_fake.count() == 3 and wurk_fake.count(collect) == 2 and wurk_fake.count(explode) == 0
    assert [p["class"] for p in wurk_fake.all()] == ["testing.collect", "testing.collect", "testing.other"]


def test_jobs_are_found_by_function_class_or_wire_name(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    SeesPayload.perform_async("a")
    for key in (collect, collect.job_class, "testing.collect"):
        assert [p["args"] for p in wurk_fake.jobs_for(key)] == [[1]]
    for key in (SeesPayload, "testing.SeesPayload"):
        [p] = wurk_fake.jobs_for(key)
        assert (p["queue"], p["retry"], p["args"]) == ("payloads", 3, ["a"])
    assert wurk_fake.jobs_for("testing.never-pushed") == []
    with pytest.raises(TypeError, match="expected a job"):
        wurk_fake.jobs_for(42)


def test_jobs_for_returns_a_copy(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    wurk_fake.jobs_for(collect).clear()
    assert wurk_fake.count(collect) == 1


def test_recorded_payloads_went_through_json(wurk_fake: FakeQueues) -> None:
    collect.perform_async((1, 2), {"k": (3,)})
    [p] = wurk_fake.jobs_for(collect)
    assert p["args"] == [[1, 2], {"k": [3]}]
    wurk_fake.drain()
    assert calls == [("collect", [[1, 2], {"k": [3]}])]


def test_set_options_and_bulk_pushes_are_recorded(wurk_fake: FakeQueues) -> None:
    collect.set(queue="urgent", retry=False, tags=["t"]).perform_async(1)
    jids = collect.perform_bulk([(2,), (3,)])
    payloads = wurk_fake.jobs_for(collect)
    assert (payloads[0]["queue"], payloads[0]["retry"], payloads[0]["tags"]) == ("urgent", False, ["t"])
    assert [p["jid"] for p in payloads[1:]] == jids
    assert [p["args"] for p in payloads] == [[1], [2], [3]]


def test_fake_does_not_touch_redis(wurk: Wurk, r: Any, wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    collect.perform_in(60, 2)
    assert r.dbsize() == 0
    assert wurk_fake.count() == 2


def test_scheduled_pushes_carry_at_and_no_enqueued_at(wurk_fake: FakeQueues) -> None:
    before = time.time()
    collect.perform_in(60, "in")
    when = datetime.now(UTC) + timedelta(hours=2)
    collect.perform_at(when, "at")
    collect.perform_in(1_900_000_000, "absolute")  # an epoch, not an interval
    inn, att, absolute = wurk_fake.jobs_for(collect)
    assert before + 60 <= inn["at"] <= time.time() + 60
    assert att["at"] == pytest.approx(when.timestamp())
    assert absolute["at"] == 1_900_000_000
    assert all("enqueued_at" not in p for p in (inn, att, absolute))
    # Already due: pushed at once, like Sidekiq.
    collect.perform_in(-5, "due")
    [due] = [p for p in wurk_fake.jobs_for(collect) if p["args"] == ["due"]]
    assert "at" not in due and "enqueued_at" in due


def test_fake_records_with_the_configured_timestamp_style() -> None:
    engine = Wurk()
    engine.configure(Config(timestamps=TimestampStyle.INT_MILLISECONDS))
    queues = FakeQueues(engine)
    queues.push([{"class": "testing.collect", "args": [1], "queue": "default", "jid": "j"}], None)
    [p] = queues.jobs_for("testing.collect")
    assert isinstance(p["enqueued_at"], int) and abs(p["enqueued_at"] / 1000 - time.time()) < 5


def test_clear_all_or_one_job(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    other.perform_async(2)
    wurk_fake.clear(collect)
    assert wurk_fake.count(collect) == 0 and wurk_fake.count(other) == 1
    wurk_fake.clear("testing.never-pushed")  # nothing to clear is fine
    collect.perform_async(3)
    wurk_fake.clear()
    assert wurk_fake.count() == 0 and wurk_fake.all() == []
    assert wurk_fake.drain() == 0


# Fake mode: running --------------------------------------------------------------------


def test_drain_runs_every_job_in_push_order_per_job(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    other.perform_async("o")
    collect.perform_async(2, 3)
    assert wurk_fake.drain() == 3
    assert [c for c in calls if c[0] == "collect"] == [("collect", [1]), ("collect", [2, 3])]
    assert ("other", "o") in calls
    assert wurk_fake.count() == 0
    assert wurk_fake.drain() == 0


def test_drain_runs_jobs_pushed_by_jobs(wurk_fake: FakeQueues) -> None:
    chain.perform_async(3)
    assert wurk_fake.drain() == 4
    assert calls == [("chain", 3), ("chain", 2), ("chain", 1), ("chain", 0)]
    assert wurk_fake.count() == 0


def test_drain_one_job_leaves_the_others(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    other.perform_async(2)
    assert wurk_fake.drain(other) == 1
    assert calls == [("other", 2)]
    assert wurk_fake.count(collect) == 1
    assert wurk_fake.drain("testing.collect") == 1
    assert calls[-1] == ("collect", [1])


def test_drain_can_leave_future_scheduled_jobs(wurk_fake: FakeQueues) -> None:
    collect.perform_in(3600, "later")
    collect.perform_async("now")
    assert wurk_fake.drain(include_scheduled=False) == 1
    assert calls == [("collect", ["now"])]
    [left] = wurk_fake.jobs_for(collect)
    assert left["args"] == ["later"]
    assert wurk_fake.drain() == 1
    assert calls[-1] == ("collect", ["later"])


def test_a_job_sees_its_jid_and_payload_without_at(wurk_fake: FakeQueues) -> None:
    jid = SeesPayload.perform_async(1)
    later_jid = SeesPayload.perform_in(600, 2)
    wurk_fake.drain()
    seen = [c[1] for c in calls]
    assert [s["jid"] for s in seen] == [jid, later_jid]
    for s in seen:
        assert s["payload"]["jid"] == s["jid"]
        assert s["payload"]["class"] == "testing.SeesPayload"
        assert "at" not in s["payload"]
        # What a worker hands a job: it was enqueued (a scheduled one when it came due).
        assert "enqueued_at" in s["payload"]


def test_perform_one_runs_the_oldest_and_returns_its_result(wurk_fake: FakeQueues) -> None:
    collect.perform_async(1)
    collect.perform_async(1, 2)
    assert wurk_fake.perform_one(collect) == 1
    assert calls == [("collect", [1])]
    assert wurk_fake.count(collect) == 1
    assert wurk_fake.perform_one("testing.collect") == 2
    with pytest.raises(LookupError, match=r"testing\.collect"):
        wurk_fake.perform_one(collect)
    with pytest.raises(LookupError):
        wurk_fake.perform_one(other)


def test_drain_propagates_a_job_exception(wurk_fake: FakeQueues) -> None:
    explode.perform_async("kaboom")
    collect.perform_async(1)
    with pytest.raises(RuntimeError, match="kaboom"):
        wurk_fake.drain(explode)
    assert wurk_fake.count(explode) == 0  # it was taken before it ran
    assert wurk_fake.count(collect) == 1
    explode.perform_async("again")
    with pytest.raises(RuntimeError, match="again"):
        wurk_fake.perform_one(explode)


def test_drain_of_an_unknown_class_raises(wurk_fake: FakeQueues) -> None:
    from django_wurk import UnknownJobError

    global_wurk.client.push({"class": "Some::RubyJob", "args": [], "queue": "default", "retry": True})
    assert wurk_fake.count("Some::RubyJob") == 1
    with pytest.raises(UnknownJobError):
        wurk_fake.drain()


# Inline mode ---------------------------------------------------------------------------


def test_inline_runs_at_once(wurk_inline: None) -> None:
    jid = collect.perform_async(1, 2)
    assert calls == [("collect", [1, 2])]
    assert jid is not None and len(jid) == 24
    chain.perform_async(2)
    assert calls[1:] == [("chain", 2), ("chain", 1), ("chain", 0)]


def test_inline_runs_scheduled_jobs_at_once_too(wurk_inline: None) -> None:
    collect.perform_in(3600, "later")
    collect.perform_at(datetime.now(UTC) + timedelta(days=1), "tomorrow")
    assert calls == [("collect", ["later"]), ("collect", ["tomorrow"])]


def test_inline_job_sees_what_a_worker_would(wurk_inline: None) -> None:
    jid = SeesPayload.perform_async((1, 2), {"k": "v"})
    [(_, seen)] = calls
    assert seen["jid"] == jid and seen["payload"]["jid"] == jid
    assert seen["args"] == [[1, 2], {"k": "v"}]  # JSON round trip: the tuple is a list
    assert (seen["payload"]["queue"], seen["payload"]["retry"]) == ("payloads", 3)
    assert "enqueued_at" in seen["payload"] and "created_at" in seen["payload"]


def test_inline_propagates_exceptions(wurk_inline: None) -> None:
    with pytest.raises(RuntimeError, match="now"):
        explode.perform_async("now")
    assert calls == [("explode", "now")]


def test_inline_does_not_touch_redis(wurk: Wurk, r: Any, wurk_inline: None) -> None:
    collect.perform_async(1)
    collect.perform_in(60, 2)
    assert r.dbsize() == 0
    assert len(calls) == 2


# Middleware and argument checks, in both modes ----------------------------------------


def test_fake_applies_client_middleware(wurk_fake: FakeQueues) -> None:
    global_wurk.client_middleware.add(DropArg)
    assert collect.perform_async("drop") is None
    assert collect.perform_in(60, "drop") is None
    assert wurk_fake.count() == 0
    assert collect.perform_async("keep") is not None
    [p] = wurk_fake.jobs_for(collect)
    assert p["tagged_by"] == "DropArg"
    assert collect.perform_bulk([("drop",), ("keep",)])[0] is None
    assert wurk_fake.count(collect) == 2


def test_inline_applies_client_middleware(wurk_inline: None) -> None:
    global_wurk.client_middleware.add(DropArg)
    assert collect.perform_async("drop") is None
    assert calls == []
    SeesPayload.perform_async("keep")
    [(_, seen)] = calls
    assert seen["payload"]["tagged_by"] == "DropArg"


def test_fake_drain_applies_server_middleware(wurk_fake: FakeQueues) -> None:
    global_wurk.server_middleware.add(Around)
    other.perform_async(1)
    wurk_fake.drain()
    assert calls == [("before", ("testing.other", "low", True)), ("other", 1), ("after", "testing.other")]
    calls.clear()
    collect.perform_async(2)
    wurk_fake.perform_one(collect)
    assert names() == ["before", "collect", "after"]


def test_inline_applies_server_middleware(wurk_inline: None) -> None:
    global_wurk.server_middleware.add(Around)
    SeesPayload.perform_async(1)
    assert names() == ["before", "SeesPayload", "after"]
    assert calls[0] == ("before", ("testing.SeesPayload", "payloads", True))


def test_server_middleware_can_skip_the_job(wurk_fake: FakeQueues) -> None:
    class Skip:
        def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
            calls.append(("skipped", payload["args"]))

    global_wurk.server_middleware.add(Skip)
    collect.perform_async(1)
    assert wurk_fake.drain() == 1
    assert calls == [("skipped", [1])]


@pytest.mark.parametrize("mode", ["fake", "inline"])
@pytest.mark.parametrize(
    ("args", "where"),
    [
        ((1, datetime.now(UTC)), r"args\[1\] is a datetime\.datetime"),
        (({"when": datetime.now(UTC)},), r"args\[0\]\['when'\] is a datetime\.datetime"),
        (({1: "x"},), r"args\[0\] has a key 1 of type int"),
        (([1, {2, 3}],), r"args\[0\]\[1\] is a builtins\.set"),
        ((float("nan"),), r"args\[0\] is nan"),
    ],
)
def test_non_json_arguments_raise_type_error_naming_them(
    mode: str, args: tuple[Any, ...], where: str
) -> None:
    with testing.fake() if mode == "fake" else testing.inline():
        with pytest.raises(TypeError, match=where):
            collect.perform_async(*args)
        with pytest.raises(TypeError, match=where):
            collect.perform_in(60, *args)
        if mode == "fake":
            assert isinstance(global_wurk.pusher, FakeQueues) and global_wurk.pusher.count() == 0
    assert calls == []


def test_module_of_testing_jobs_uses_unique_wire_names() -> None:
    from django_wurk.core.registry import registry

    for fn in (collect, other, chain, explode):
        assert registry.resolve(fn.wire_name) is fn.job_class
    assert registry.resolve("testing.SeesPayload") is SeesPayload
    assert testing_jobs.__name__ == "tests.jobsapp.testing_jobs"
