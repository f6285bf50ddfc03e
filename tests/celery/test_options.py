"""Celery's remaining task options, each working on a real worker or refused with its reason.

time_limit / soft_time_limit (on the timeouts watchdog), rate_limit (on the limiters),
task_routes, link / link_error, map / starmap / chunks, and the options that cannot be
honoured, refused where they are given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk.api import DeadSet
from django_wurk.celery import AsyncResult, states
from django_wurk.celery.exceptions import ImproperlyConfigured, SoftTimeLimitExceeded, TimeLimitExceeded
from django_wurk.celery.task import Task, default_app
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.celery import option_tasks as opt
from tests.conftest import queue_entries, wait_for

# time_limit, soft_time_limit ----------------------------------------------------------------


def test_a_task_blocked_past_its_time_limit_fails_with_time_limit_exceeded(
    celery_workers: Launcher, r: Any
) -> None:
    result = opt.sleeps.apply_async((8,), link_error=opt.on_error.s())
    with pytest.raises(TimeLimitExceeded, match="time_limit of 1 s"):
        result.get(timeout=20)
    assert result.state == states.FAILURE
    # Recorded by the watchdog when it gave up (a second after the limit): the task's thread
    # is still asleep, and will record nothing when it wakes.
    assert running(opt.sleeps.run_function)
    dead = wait_for(lambda: list(DeadSet()))
    assert dead[0].jid == result.id and dead[0].error_class == "TimeLimitExceeded"
    # The errback ran once, for the watchdog's failure; the thread's late return adds nothing.
    wait_for(lambda: r.llen("errback:new") == 1)
    wait_for(lambda: not running(Task._execute), timeout=30)  # the sleep ended, the thread came back
    assert r.lrange("errback:new", 0, -1) == [f"{result.id} TimeLimitExceeded".encode()]
    assert result.state == states.FAILURE


def running(fn: Any) -> bool:
    """Whether any thread of this process is inside ``fn`` now."""
    for frame in sys._current_frames().values():
        current: Any = frame
        while current is not None:
            if current.f_code is fn.__code__:
                return True
            current = current.f_back
    return False


def test_a_python_loop_past_its_time_limit_is_stopped_inside(celery_workers: Launcher, r: Any) -> None:
    result = opt.naps.delay(2.5)
    with pytest.raises(TimeLimitExceeded):
        result.get(timeout=20)
    stored = json.loads(r.get(f"celery-task-meta-{result.id}"))
    assert stored["status"] == "FAILURE"
    assert stored["result"]["exc_type"] == "TimeLimitExceeded"
    assert stored["result"]["exc_module"] == "django_wurk.celery.exceptions"
    assert "TimeLimitExceeded" in stored["traceback"]


def test_time_limits_given_per_call_ride_in_the_payload(wurk: Any, r: Any) -> None:
    opt.naps_unlimited.apply_async((2.5,), time_limit=1, soft_time_limit=0.5)
    [entry] = queue_entries(r)
    assert (entry["timeout"], entry["soft_timeout"]) == (1.0, 0.5)
    opt.sleeps.apply_async((1,))
    assert queue_entries(r)[0]["timeout"] == 1.0 and "soft_timeout" not in queue_entries(r)[0]


def test_a_call_time_limit_stops_a_task_without_one(celery_workers: Launcher) -> None:
    result = opt.naps_unlimited.apply_async((2.5,), time_limit=1)
    with pytest.raises(TimeLimitExceeded):
        result.get(timeout=20)


def test_the_soft_time_limit_is_raised_inside_and_the_task_cleans_up(
    celery_workers: Launcher, r: Any
) -> None:
    result = opt.cleans_up.delay("soft")
    assert result.get(timeout=20) == "cleaned up"
    assert result.state == states.SUCCESS
    assert r.lrange("soft", 0, -1) == [b"cleaned up"]


def test_an_uncaught_soft_time_limit_is_the_tasks_failure(celery_workers: Launcher) -> None:
    result = opt.naps_unlimited.apply_async((30,), soft_time_limit=0.5)
    with pytest.raises(SoftTimeLimitExceeded):
        result.get(timeout=20)


def test_time_limit_values_are_checked() -> None:
    with pytest.raises(ImproperlyConfigured, match="time_limit must be seconds"):
        default_app.task(name="opts.bad_limit", time_limit="soon")(lambda: None)
    with pytest.raises(ImproperlyConfigured, match="soft_time_limit must be seconds"):
        opt.square.apply_async((1,), soft_time_limit=-1)


# rate_limit -------------------------------------------------------------------------------------


def test_rate_limit_holds_across_the_worker(celery_workers: Launcher, r: Any) -> None:
    for _ in range(15):
        opt.counted.delay("starts")
    wait_for(lambda: r.llen("starts") == 15, timeout=60)
    starts = sorted(float(s) for s in r.lrange("starts", 0, -1))
    # 5/s: no half second holds more than 5 starts (10 threads would start all 15 at once);
    # half a window, so a start recorded a moment after its admission cannot blur the count.
    assert max(sum(1 for t in starts if first <= t < first + 0.5) for first in starts) <= 5
    assert starts[-1] - starts[0] >= 1.5  # 15 at 5 a second take two windows at least


@pytest.mark.parametrize(
    ("rate", "expected"),
    [("10/s", (10, 1.0)), ("100/m", (100, 60.0)), ("1000/h", (1000, 3600.0)), (5, (5, 1.0)),
     ("0.5/s", (1, 2.0)), ("0", None), (None, None)],
)  # fmt: skip
def test_rate_limit_syntax(rate: Any, expected: Any) -> None:
    from django_wurk.celery.limits import parse_rate

    assert parse_rate(rate, "t") == expected


def test_a_bad_rate_limit_is_refused_at_definition() -> None:
    with pytest.raises(ImproperlyConfigured, match="rate_limit must be"):
        default_app.task(name="opts.bad_rate", rate_limit="10 per second")(lambda: None)


# task_routes ------------------------------------------------------------------------------------


@pytest.fixture
def routes() -> Iterator[Any]:
    def use(value: Any) -> None:
        default_app.conf["task_routes"] = value

    yield use
    default_app.conf["task_routes"] = None


def test_task_routes_choose_the_queue(wurk: Any, r: Any, routes: Any) -> None:
    routes(
        {
            "tests.celery.celery_style_tasks.add": {"queue": "exact"},
            "tests.celery.option_tasks.*": "globbed",
        }
    )
    tasks.add.delay(1, 2)
    opt.square.delay(3)
    assert [e["args"] for e in queue_entries(r, "exact")] == [[1, 2]]
    assert [e["args"] for e in queue_entries(r, "globbed")] == [[3]]
    # The call's queue, then the task's own, win over a route.
    tasks.add.apply_async((5, 6), queue="called")
    tasks.multiply.delay(2, 2)  # queue="math" on the task
    assert queue_entries(r, "called")[0]["args"] == [5, 6]
    assert queue_entries(r, "math")[0]["args"] == [2, 2]


def test_task_routes_list_of_routers_in_order(wurk: Any, r: Any, routes: Any) -> None:
    import re

    seen = []

    def router(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> Any:
        seen.append((name, list(args), task))
        return "from-callable" if name.endswith(".square") else None

    routes([router, {re.compile(r".*\.add$"): {"queue": "by-regex"}}])
    opt.square.delay(4)
    tasks.add.delay(7, 8)
    tasks.whoami.delay()  # no router answers: the default queue
    assert queue_entries(r, "from-callable")[0]["args"] == [4]
    assert queue_entries(r, "by-regex")[0]["args"] == [7, 8]
    assert queue_entries(r, "default")[0]["class"] == "tests.celery.celery_style_tasks.whoami"
    assert seen[0] == ("tests.celery.option_tasks.square", [4], opt.square)


def test_a_route_with_amqp_options_is_refused(wurk: Any, routes: Any) -> None:
    routes({"tests.celery.celery_style_tasks.add": {"queue": "q", "routing_key": "q"}})
    with pytest.raises(ImproperlyConfigured, match="routing_key"):
        tasks.add.delay(1, 2)


def test_a_routed_task_runs_on_a_worker_of_its_queue(celery_workers: Launcher, routes: Any) -> None:
    routes({"tests.celery.option_tasks.square": {"queue": "math"}})
    assert opt.square.delay(9).get(timeout=10) == 81


# link, link_error -------------------------------------------------------------------------------


def test_link_calls_the_callback_once_with_the_result(celery_workers: Launcher, r: Any) -> None:
    result = tasks.add.apply_async((2, 3), link=opt.record.s("linked").set(task_id="cb-1"))
    assert result.get(timeout=10) == 5
    assert AsyncResult("cb-1").get(timeout=10) == 5
    assert r.lrange("linked", 0, -1) == [b"5"]
    assert r.llen("queue:default") == 0 and r.zcard("schedule") == 0 and r.zcard("retry") == 0


def test_a_signature_link_and_an_immutable_callback(celery_workers: Launcher, r: Any) -> None:
    sig = tasks.add.s(1, 1)
    sig.link(opt.record.si("fixed", "imm").set(task_id="cb-2"))
    sig.delay()
    assert AsyncResult("cb-2").get(timeout=10) == "fixed"
    assert r.lrange("imm", 0, -1) == [b"'fixed'"]


def test_link_error_calls_each_errback_once_on_failure(celery_workers: Launcher, r: Any) -> None:
    result = tasks.boom.apply_async(
        ("kaput",),
        link=opt.record.s("never"),
        link_error=[opt.on_error.s(), opt.on_error_by_id.s().set(task_id="eb")],
    )
    with pytest.raises(ValueError):
        result.get(timeout=10)
    AsyncResult("eb").get(timeout=10)
    assert r.lrange("errback:new", 0, -1) == [f"{result.id} ValueError".encode()]
    assert r.lrange("errback:old", 0, -1) == [result.id.encode()]
    assert r.llen("never") == 0


def test_a_retry_does_not_call_the_errback(celery_workers: Launcher, r: Any) -> None:
    result = tasks.flaky.apply_async(
        ("l", 1), link_error=opt.on_error.s(), link=opt.record.s("ok").set(task_id="cb-3")
    )
    assert result.get(timeout=10) == "ok after 1"
    AsyncResult("cb-3").get(timeout=10)
    assert r.llen("errback:new") == 0 and r.lrange("ok", 0, -1) == [b"'ok after 1'"]


def test_a_chains_link_follows_its_last_step_and_its_link_error_any_step(
    celery_workers: Launcher, r: Any
) -> None:
    from django_wurk.celery import chain, chord

    done = chain(tasks.add.s(1, 2), tasks.add.s(10)).apply_async(
        link=opt.record.s("chained").set(task_id="cb-c")
    )
    assert done.get(timeout=10) == 13
    assert AsyncResult("cb-c").get(timeout=10) == 13
    assert r.lrange("chained", 0, -1) == [b"13"]  # once, with the last step's value

    broken = chain(tasks.boom.si("first"), tasks.add.s(1)).on_error(opt.on_error.s())
    last = broken.apply_async()
    with pytest.raises(ValueError):
        last.parent.get(timeout=10)
    wait_for(lambda: r.llen("errback:new") == 1)
    assert r.lrange("errback:new", 0, -1) == [f"{last.parent.id} ValueError".encode()]

    summed = chord([tasks.add.s(1, 1), tasks.add.s(2, 2)], opt.total.s())
    assert summed.apply_async(link=opt.record.s("chorded").set(task_id="cb-ch")).get(timeout=10) == 6
    assert AsyncResult("cb-ch").get(timeout=10) == 6  # the body's callback, not each header task's
    assert r.lrange("chorded", 0, -1) == [b"6"]


def test_link_must_be_a_signature() -> None:
    with pytest.raises(ImproperlyConfigured, match="link must be a signature"):
        tasks.add.apply_async((1, 2), link=opt.record)


def test_eager_runs_call_their_callbacks(wurk: Any, r: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(default_app.conf, "task_always_eager", True)
    assert opt.square.apply_async((4,), link=opt.record.s("eager")).get() == 16
    assert r.lrange("eager", 0, -1) == [b"16"]
    failed = tasks.boom.apply_async(("x",), link_error=opt.on_error_by_id.s())
    assert failed.state == states.FAILURE and r.lrange("errback:old", 0, -1) == [failed.id.encode()]
    assert r.llen("queue:default") == 0
    with pytest.raises(ImproperlyConfigured, match="exchange="):
        opt.square.apply_async((4,), exchange="x")  # refused in an eager run too


# map, starmap, chunks ---------------------------------------------------------------------------


def test_map_starmap_and_chunks(celery_workers: Launcher) -> None:
    assert opt.square.map([1, 2, 3]).delay().get(timeout=10) == [1, 4, 9]
    assert tasks.add.starmap([(1, 2), (3, 4)]).apply_async().get(timeout=10) == [3, 7]
    parts = tasks.add.chunks(zip(range(7), range(7), strict=True), 3).apply_async()
    assert len(parts) == 3
    assert parts.get(timeout=10) == [[0, 2, 4], [6, 8, 10], [12]]
    assert len(tasks.add.chunks([(1, 1)] * 4, 2).group().tasks) == 2


def test_map_is_a_signature_of_celerys_builtin_task() -> None:
    sig = opt.square.map([1, 2])
    assert sig.task == "celery.map" and sig["subtask_type"] == "xmap"
    assert sig.kwargs["it"] == [1, 2] and sig.kwargs["task"]["task"] == "tests.celery.option_tasks.square"
    with pytest.raises(ValueError, match="n must be"):
        opt.square.chunks([1], 0)


# Refused options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [("exchange", "x", "no AMQP exchange"), ("routing_key", "k", "no AMQP routing"),
     ("compression", "zlib", "plain JSON"), ("retry", False, "EnqueueError"), ("retry_policy", {}, "EnqueueError"),
     ("shadow", "other", "task's name"), ("headers", {"a": 1}, "headers"), ("colour", "red", "not a Celery option")],
)  # fmt: skip
def test_options_that_cannot_be_honoured_are_refused_at_the_call(wurk: Any, r: Any, option: str, value: Any,
                                                                   reason: str) -> None:  # fmt: skip
    with pytest.raises(ImproperlyConfigured, match=f"{option}=.*{reason}"):
        tasks.add.apply_async((1, 2), **{option: value})
    assert r.llen("queue:default") == 0


def test_task_options_that_cannot_be_honoured_are_refused_at_definition() -> None:
    with pytest.raises(ImproperlyConfigured, match="acks_late=False is not supported"):
        default_app.task(name="opts.early", acks_late=False)(lambda: None)
    with pytest.raises(ImproperlyConfigured, match="reject_on_worker_lost=False"):
        default_app.task(name="opts.reject", reject_on_worker_lost=False)(lambda: None)
    # True is what reliable fetch does: accepted.
    assert default_app.task(name="opts.late", acks_late=True, reject_on_worker_lost=True)(lambda: 1)() == 1
    with pytest.raises(ImproperlyConfigured, match=r"throws=.*no quieter log"):
        default_app.task(name="opts.throws", throws=(KeyError,))(lambda: None)
    assert default_app.task(name="opts.nothrows", throws=())(lambda: 2)() == 2
    with pytest.raises(ImproperlyConfigured, match="pydantic=True is not supported"):
        default_app.task(name="opts.pydantic", pydantic=True)(lambda: None)


def test_retry_with_other_options_is_refused(wurk: Any) -> None:
    from django_wurk.celery.task import Request, _running

    token = _running.set(Request(id="x", task=tasks.flaky.name, called_directly=False, args=["k", 1]))
    try:
        with pytest.raises(ImproperlyConfigured, match="queue= is not supported"):
            tasks.flaky.retry(queue="other")
    finally:
        _running.reset(token)


# Settings ---------------------------------------------------------------------------------------


def test_manage_check_names_each_celery_setting_nothing_reads() -> None:
    from django.test import override_settings

    from django_wurk.checks import check_celery_settings

    with override_settings(
        CELERY_TASK_ROUTES={"a.*": "q"},
        CELERY_TASK_TIME_LIMIT=60,
        CELERY_BROKER_URL="redis://old",
        CELERY_RESULT_BACKEND="redis://old",
        CELERY_TASK_SERIALIZER="json",
        CELERY_ACCEPT_CONTENT=["json"],
        CELERY_TASK_ANNOTATIONS={"a.add": {"rate_limit": "1/s"}},
        CELERY_WORKER_CONCURRENCY=8,
        CELERY_RESULT_SERIALIZER="pickle",
    ):
        found = sorted(m.msg.split()[0] for m in check_celery_settings())
        assert {m.id for m in check_celery_settings()} == {"django_wurk.W006"}
    assert found == ["CELERY_RESULT_SERIALIZER", "CELERY_TASK_ANNOTATIONS", "CELERY_WORKER_CONCURRENCY"]


# typing, store_errors_even_if_ignored -------------------------------------------------------------


def test_arguments_are_checked_when_the_task_is_sent(wurk: Any, r: Any) -> None:
    with pytest.raises(TypeError, match="missing a required argument: 'y'"):
        tasks.add.delay(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        tasks.add.apply_async((1, 2), {"colour": "red"})
    tasks.whoami.delay(1, 2, any="thing")  # bind=True: self is not the caller's to give
    unchecked = default_app.task(name="opts.unchecked", typing=False)(lambda x: x)
    unchecked.delay()  # typing=False: sent as it is, as in Celery
    assert [e["class"] for e in queue_entries(r)] == [
        "opts.unchecked",
        "tests.celery.celery_style_tasks.whoami",
    ]


def test_store_errors_even_if_ignored(celery_workers: Launcher, r: Any) -> None:
    quiet = default_app.task(name="tests.celery.test_options.quiet", ignore_result=True)(_fails)
    kept = default_app.task(
        name="tests.celery.test_options.kept", ignore_result=True, store_errors_even_if_ignored=True
    )(_fails)
    with pytest.raises(RuntimeError, match="kept"):
        kept.delay("kept").get(timeout=10)
    ignored = quiet.delay("quiet")
    wait_for(lambda: r.zcard("dead") == 2)
    assert ignored.state == states.PENDING  # no record at all


def _fails(message: str) -> None:
    raise RuntimeError(message)


def test_soft_time_limit_above_time_limit_is_refused() -> None:
    with pytest.raises(
        ImproperlyConfigured, match="soft_time_limit must be less than or equal to time_limit"
    ):
        default_app.task(name="opts.limits", time_limit=1, soft_time_limit=2)(lambda: None)
