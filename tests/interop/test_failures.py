"""Failures cross over: retry and dead entries written by one side are read and acted on by the other.

Python failures are read by Sidekiq's ``RetrySet``/``DeadSet`` and moved by Ruby's
``SortedEntry#retry/#kill/#add_to_queue``; Ruby failures are read by our API, retried by it
and run (and failed again) by our worker, which keeps Ruby's fields.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import DeadSet, RetrySet
from django_wurk.core import wire
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from django_wurk.core.worker.retry import default_delay
from tests.conftest import wait_for
from tests.interop.conftest import Peer, on_versions
from tests.jobsapp import interop_failure_jobs as fj
from tests.jobsapp import jobs
from tests.vectors import raw as vector

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()

FAILS_IN_PYTHON = "tests.jobsapp.interop_failure_jobs.fails_in_python"


def zmembers(r: Any, key: str) -> list[tuple[bytes, float]]:
    return list(r.zrange(key, 0, -1, withscores=True))


def ruby_time(t: dict[str, Any]) -> float:
    """A Time that client.rb reported (``iso8601(6)``) as epoch seconds."""
    assert t["class"] == "Time"
    return datetime.fromisoformat(t["iso"].replace("Z", "+00:00")).timestamp()


def seconds(stamp: Any) -> float:
    """A job timestamp as epoch seconds, whichever style wrote it (8.0 writes integer ms)."""
    value = wire.read_stamp(stamp)
    assert value is not None, stamp
    return value


def same_shape(
    ours: dict[str, Any],
    ruby: dict[str, Any],
    extra: frozenset[str] | set[str] = frozenset(),
    loose: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Same field names (ours may add ``extra``) and the same JSON type for each of Ruby's
    fields but ``loose`` ones."""
    assert set(ours) - extra == set(ruby), (sorted(ours), sorted(ruby))
    typed = [k for k in ruby if k not in loose]
    assert {k: type(ours[k]).__name__ for k in typed} == {k: type(ruby[k]).__name__ for k in typed}


def test_a_python_failure_is_read_retried_and_killed_by_ruby(
    peer: Peer, rb: Callable[..., Any], r: Any, wurk: Wurk, start_python_worker: Callable[..., Launcher]
) -> None:
    start_python_worker()
    started = time.time()
    jid = fj.fails_in_python.perform_async("a")
    wait_for(lambda: r.zcard("retry") == 1)
    [(first_raw, first_score)] = zmembers(r, "retry")
    first = json.loads(first_raw)

    # Sidekiq's RetrySet reads our entry field by field, and decodes our backtrace.
    entry = rb(op="entry_with_times", set="retry", jid=jid)
    assert entry["klass"] == FAILS_IN_PYTHON and entry["queue"] == "default" and entry["args"] == ["a"]
    assert entry["error_class"] == "ValueError" and entry["error_message"] == "python boom a"
    assert entry["retry_count"] == 0 and entry["retried_at"] is None
    assert entry["failed_at"] == first["failed_at"]
    frames = entry["error_backtrace"]
    assert frames[0].endswith("in `fails_in_python'") and "interop_failure_jobs.py:" in frames[0]
    assert frames == wire.decode_backtrace(first["error_backtrace"])
    times = entry["times"]
    assert ruby_time(times["failed_at"]) == pytest.approx(first["failed_at"], abs=1e-5)
    assert 0 <= times["failed_at"]["age"] < 30 and first["failed_at"] >= started - 1
    assert ruby_time(times["created_at"]) <= ruby_time(times["failed_at"])
    assert times["retried_at"] is None
    # Ruby's `at` is our score: failed_at + 15 s + jitter in [0, 10).
    assert entry["score"] == first_score
    assert first["failed_at"] + 15 <= entry["at"] < first["failed_at"] + 25

    # Ruby's "Retry Now": retry_count - 1, pushed to the queue; our worker fails it again and
    # writes what Sidekiq writes after a manual retry: retry_count unchanged, retried_at set.
    assert rb(op="entry", set="retry", jid=jid, action="retry") is True
    wait_for(lambda: len(fj.seen("fails_in_python")) == 2 and r.zcard("retry") == 1)
    [(second_raw, second_score)] = zmembers(r, "retry")
    second = json.loads(second_raw)
    ruby_after_manual_retry = json.loads(vector("retry_job_after_manual_retry.json"))
    # Sidekiq 8's "Retry Now" re-pushes with its own millisecond enqueued_at, which we keep.
    stamps = {"enqueued_at"} if peer.major >= 8 else set()
    same_shape(second, ruby_after_manual_retry, extra={"backtrace", "error_backtrace"}, loose=stamps)
    assert second["retry_count"] == 0 == ruby_after_manual_retry["retry_count"]
    assert second["jid"] == jid and second["created_at"] == first["created_at"]
    assert second["failed_at"] == first["failed_at"]  # kept from the first failure
    assert first["failed_at"] < second["retried_at"] <= time.time()
    assert second["enqueued_at"] > first["enqueued_at"]  # Ruby's push re-stamped it
    assert second["retried_at"] + default_delay(0) <= second_score < second["retried_at"] + 25

    # Ruby's Kill: moves our bytes unchanged to the dead set, which both APIs read alike.
    assert rb(op="entry", set="retry", jid=jid, action="kill") is True
    assert r.zcard("retry") == 0
    [(dead_raw, dead_score)] = zmembers(r, "dead")
    assert dead_raw == second_raw and dead_score == pytest.approx(time.time(), abs=30)
    ours = DeadSet(wurk).find_job(jid)
    assert ours is not None and ours.raw == second_raw and ours.score == dead_score
    [theirs] = rb(op="set", name="dead")["entries"]
    assert theirs["jid"] == jid and theirs["score"] == ours.score
    assert (theirs["error_class"], theirs["error_message"], theirs["retry_count"]) == (
        ours.error_class,
        ours.error_message,
        ours.get("retry_count"),
    )
    assert theirs["error_backtrace"] == ours.backtrace
    assert theirs["failed_at"] == ours.get("failed_at") and theirs["retried_at"] == ours.get("retried_at")

    # Our worker leaves the dead set alone: once our poller has promoted a job scheduled after
    # the kill, the dead entry is still there, unchanged, and the job did not run again.
    jobs.echo.perform_in(0.3, "poller went round")
    wait_for(lambda: r.llen("seen:echo") == 1)
    assert zmembers(r, "dead") == [(dead_raw, dead_score)]
    assert r.zcard("retry") == 0 and r.llen("queue:default") == 0
    assert len(fj.seen("fails_in_python")) == 2


def test_ruby_add_to_queue_runs_a_job_we_scheduled(
    rb: Callable[..., Any], r: Any, start_python_worker: Callable[..., Launcher]
) -> None:
    start_python_worker()
    jid = jobs.echo.perform_in(3600, "from the schedule", {"n": [1, 2.5, None]})
    [(scheduled_raw, _)] = zmembers(r, "schedule")
    assert "enqueued_at" not in json.loads(scheduled_raw)
    assert rb(op="entry", set="schedule", jid=jid, action="add_to_queue") is True
    wait_for(lambda: r.llen("seen:echo") == 1)
    assert [json.loads(x) for x in r.lrange("seen:echo", 0, -1)] == [
        ["from the schedule", {"n": [1, 2.5, None]}]
    ]
    assert r.zcard("schedule") == 0 and r.zcard("retry") == 0


def test_ruby_reads_and_retries_a_python_dead_entry(
    rb: Callable[..., Any], r: Any, wurk: Wurk, start_python_worker: Callable[..., Launcher]
) -> None:
    start_python_worker()
    jid = jobs.dies_at_once.perform_async(2)  # retry=0: straight to the dead set
    wait_for(lambda: r.zcard("dead") == 1)
    [(raw, score)] = zmembers(r, "dead")
    [dead] = rb(op="set", name="dead")["entries"]
    assert dead["jid"] == jid and dead["score"] == score and dead["args"] == [2]
    assert (dead["error_class"], dead["error_message"], dead["retry_count"]) == ("RuntimeError", "fatal 2", 0)
    assert dead["failed_at"] == json.loads(raw)["failed_at"] and dead["retried_at"] is None

    # Ruby's Retry from the dead set: retry_count -1 on the queue; it dies again in our worker
    # and is buried again as Sidekiq would bury it (retry_count 0, retried_at set).
    assert rb(op="entry", set="dead", jid=jid, action="retry") is True
    wait_for(lambda: r.zcard("dead") == 1 and zmembers(r, "dead")[0][0] != raw)
    again = json.loads(zmembers(r, "dead")[0][0])
    assert (
        again["jid"] == jid
        and again["retry_count"] == 0
        and again["failed_at"] == json.loads(raw)["failed_at"]
    )
    assert again["retried_at"] > again["failed_at"]


def test_a_ruby_failure_is_read_retried_run_and_failed_again_by_python(
    peer: Peer,
    rb: Callable[..., Any],
    r: Any,
    wurk: Wurk,
    ruby_worker: Callable[..., Any],
    start_python_worker: Callable[..., Launcher],
) -> None:
    assert registry.resolve("Interop::Fail") is fj.InteropFail
    ruby = ruby_worker("ruby")
    modes = ["py-ok", "py-fail", "py-kill"]
    jids = rb(
        op="push_bulk",
        items={
            "class": "Interop::Fail",
            "queue": "ruby",
            "retry": 3,
            "backtrace": True,
            "args": [[m] for m in modes],
        },
    )
    wait_for(lambda: r.zcard("retry") == 3, timeout=20)
    # Stop Ruby so that Python runs what comes next (its first retry is >= 15 s away anyway).
    ruby.proc.send_signal(signal.SIGTERM)
    ruby.proc.wait(20)

    # Our RetrySet reads Sidekiq 6.4.1's entries, including its line-wrapped base64 backtrace.
    entries = {e.jid: e for e in RetrySet(wurk)}
    ok, fail, kill = (entries[j] for j in jids)
    for entry, mode in zip((ok, fail, kill), modes, strict=True):
        assert entry.job_class == "Interop::Fail" and entry.queue == "ruby" and entry.args == [mode]
        assert entry.error_class == "ArgumentError" and entry.error_message == f'ruby boom ["{mode}"]'
        assert entry.get("retry_count") == 0 and entry.retried_at is None
        assert entry.failed_at == pytest.approx(time.time(), abs=30)
        # 6.4.1 wraps its base64 every 60 characters, 7.2.3+ writes it strict.
        assert ("\n" in entry.get("error_backtrace")) == (peer.major < 7)
        assert "interop/ruby/app.rb:" in entry.backtrace[0] and entry.backtrace[0].endswith("in `perform'")
    ruby_failed = {e.jid: dict(e.payload or {}) for e in (ok, fail, kill)}

    r.set("interop:mode:py-fail", "fail")
    r.set("interop:mode:py-kill", "kill")
    start_python_worker("ruby")
    assert ok.retry()  # our "Retry Now"
    assert fail.reschedule(time.time() - 1) and kill.reschedule(time.time() - 1)  # due: our poller takes them
    wait_for(lambda: len(fj.seen("Interop::Fail")) == 3 and r.zcard("retry") == 1 and r.zcard("dead") == 1)

    # The manual retry ran in Python with Ruby's fields and retry_count lowered by one.
    [ran] = [s["payload"] for s in fj.seen("Interop::Fail") if s["args"] == ["py-ok"]]
    before = ruby_failed[ok.jid]
    assert ran["retry_count"] == -1 and seconds(ran["enqueued_at"]) > seconds(before["enqueued_at"])
    assert {k: ran[k] for k in ran if k not in ("retry_count", "enqueued_at")} == {
        k: before[k] for k in before if k not in ("retry_count", "enqueued_at")
    }

    # Failed again in Python: Ruby's fields kept, retry_count + 1, retried_at set, our error.
    for key, job_jid, mode in (("retry", fail.jid, "fail"), ("dead", kill.jid, "kill")):
        [(raw, score)] = zmembers(r, key)
        again = json.loads(raw)
        before = ruby_failed[job_jid]
        assert again["jid"] == job_jid and again["queue"] == "ruby"
        assert again["failed_at"] == before["failed_at"] and again["created_at"] == before["created_at"]
        assert again["retry_count"] == 1 and seconds(before["failed_at"]) < again["retried_at"] <= time.time()
        assert (again["retry"], again["backtrace"], again["class"]) == (3, True, "Interop::Fail")
        assert again["error_class"] == "PythonBoom" and again["error_message"] == f"python {mode} py-{mode}"
        frames = wire.decode_backtrace(again["error_backtrace"])
        assert frames[0].endswith("in `perform'") and "interop_failure_jobs.py:" in frames[0]
        assert "\n" not in again["error_backtrace"]  # we write strict base64
        rewritten = {"error_message", "error_class", "error_backtrace", "retry_count", "enqueued_at"}
        assert {k: again[k] for k in before if k not in rewritten} == {
            k: v for k, v in before.items() if k not in rewritten
        }
        if key == "retry":
            assert (
                again["retried_at"] + default_delay(1) <= score < again["retried_at"] + default_delay(1) + 20
            )
        else:
            assert score == pytest.approx(time.time(), abs=30)

    # Ruby reads the retry entry we wrote for its job...
    entry = rb(op="entry_with_times", set="retry", jid=fail.jid)
    assert entry["retry_count"] == 1 and entry["error_class"] == "PythonBoom"
    assert (
        entry["error_backtrace"][0].endswith("in `perform'")
        and "interop_failure_jobs.py:" in entry["error_backtrace"][0]
    )
    assert ruby_time(entry["times"]["failed_at"]) == pytest.approx(
        seconds(ruby_failed[fail.jid]["failed_at"]), abs=1e-3
    )
    assert 0 <= entry["times"]["retried_at"]["age"] < 30

    # ...and the dead entry we wrote; Ruby's Retry from the dead set brings it back to our worker.
    [dead] = rb(op="set", name="dead")["entries"]
    assert dead["jid"] == kill.jid and dead["retry_count"] == 1 and dead["error_class"] == "PythonBoom"
    assert dead["error_backtrace"] == wire.decode_backtrace(
        json.loads(zmembers(r, "dead")[0][0])["error_backtrace"]
    )
    r.delete("interop:mode:py-kill")
    assert rb(op="entry", set="dead", jid=kill.jid, action="retry") is True
    wait_for(lambda: len(fj.seen("Interop::Fail")) == 4)
    last = fj.seen("Interop::Fail")[-1]
    assert last["args"] == ["py-kill"] and last["payload"]["retry_count"] == 0  # 1, lowered by Ruby's retry
    assert last["payload"]["error_class"] == "PythonBoom" and last["payload"]["jid"] == kill.jid
    wait_for(lambda: r.zcard("dead") == 0 and r.llen("queue:ruby") == 0)
    assert r.zcard("retry") == 1  # only py-fail, still waiting for its next retry
