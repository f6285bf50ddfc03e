"""Ruby pushes, Python runs: jobs from ``Sidekiq::Client`` reach our worker unchanged."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core import wire
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import Peer, on_versions, stamp_type
from tests.interop.values import SAMPLES, typed
from tests.jobsapp import interop_jobs

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()

ARGS = [
    1,
    -2,
    3.25,
    1e-7,
    "two",
    "ünïcødé ✓ 日本",
    {"nested": {"list": [1, None, True, False]}},
    [],
    {},
    None,
    True,
]


@pytest.fixture
def python_worker(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    yield worker
    worker.stop()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


def test_client_push_runs_with_identical_arguments(
    rb: Callable[..., Any], r: Any, python_worker: Launcher
) -> None:
    jid = rb(op="push", item={"class": "PlainJob", "queue": "default", "args": ARGS})
    assert isinstance(jid, str) and len(jid) == 24
    wait_for(lambda: seen(r, "PlainJob"))
    assert seen(r, "PlainJob") == [ARGS]


# Sidekiq::Client pushes of every kind, run by our worker ------------------------------------

RECORD = interop_jobs.Record.wire_name
FAIL = interop_jobs.Fail.wire_name
#: Keys this engine gives no meaning to: Pro's batch id, Enterprise's unique lock, an app's own.
UNKNOWN = {
    "bid": "VWYf44jVYsZARw",
    "unique_for": 60,
    "custom_key": {"nested": [1, 2.5, None, "ünï"], "big": 2**60 + 1},
    "x-trace": ["a", 1e-7],
}


def stored(r: Any, queue: str) -> list[dict[str, Any]]:
    """A queue's jobs as Ruby left them, oldest (next to run) first."""
    return [json.loads(x) for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def test_push_and_push_bulk_run_in_fifo_order_per_queue_with_identical_arguments(
    peer: Peer, rb: Callable[..., Any], r: Any, start_python_worker: Callable[..., Launcher]
) -> None:
    start_python_worker("default", "wire_bulk")
    calls: list[dict[str, Any]] = [{"push": {"class": RECORD, "args": [value]}} for value in SAMPLES]
    calls.append({"push": {"class": RECORD, "args": SAMPLES}})
    bulk_args = [[i, value] for i, value in enumerate(SAMPLES)]
    calls.append({"push_bulk": {"class": RECORD, "queue": "wire_bulk", "args": bulk_args}})
    calls.append({"push": {"class": RECORD, "queue": "wire_bulk", "args": ["after the bulk"]}})
    results = rb(op="pushes", calls=calls)

    total = 2 * len(SAMPLES) + 2
    wait_for(lambda: len(interop_jobs.seen()) == total)
    runs = interop_jobs.seen()
    default = [run for run in runs if run["queue"] == "default"]
    bulk = [run for run in runs if run["queue"] == "wire_bulk"]
    # Same values and the same JSON types (1 is not 1.0, 2**64 + 1 is exact), in push order.
    assert [typed(run["args"]) for run in default] == typed([[v] for v in SAMPLES] + [SAMPLES])
    assert [typed(run["args"]) for run in bulk] == typed([*bulk_args, ["after the bulk"]])
    assert [run["jid"] for run in default] == results[: len(SAMPLES) + 1]
    assert [run["jid"] for run in bulk] == [*results[-2], results[-1]]
    # Ruby's timestamps arrive as it wrote them: float seconds, integer milliseconds from 8.0.
    assert all(isinstance(run["payload"]["enqueued_at"], stamp_type(peer)) for run in runs)


def test_scheduled_pushes_wait_in_the_schedule_and_our_poller_runs_them_when_due(
    peer: Peer, rb: Callable[..., Any], r: Any, start_python_worker: Callable[..., Launcher]
) -> None:
    t0 = time.time()
    single = [t0 + 1.5, t0 + 0.8, t0 - 60]  # a past `at` still goes through the schedule
    per_job = [t0 + 2.0, t0 + 0.5]
    calls: list[dict[str, Any]] = [
        {"push": {"class": RECORD, "args": [f"at {i}"], "at": at}} for i, at in enumerate(single)
    ]
    calls.append({"push_bulk": {"class": RECORD, "args": [["bulk 0"], ["bulk 1"]], "at": per_job}})
    calls.append({"push_bulk": {"class": RECORD, "args": [["same 0"], ["same 1"]], "at": t0 + 1.0}})
    results = rb(op="pushes", calls=calls)
    due = dict(
        zip([*results[:3], *results[3], *results[4]], [*single, *per_job, t0 + 1.0, t0 + 1.0], strict=True)
    )

    # No worker yet: everything waits in `schedule`, scored at its `at` (seconds), without `at`
    # or `enqueued_at` in the JSON.
    entries = {
        json.loads(m)["jid"]: (json.loads(m), s) for m, s in r.zrange("schedule", 0, -1, withscores=True)
    }
    assert set(entries) == set(due) and r.llen("queue:default") == 0
    for jid, (payload, score) in entries.items():
        assert score == due[jid]
        assert "at" not in payload and "enqueued_at" not in payload
        assert isinstance(payload["created_at"], stamp_type(peer))

    start_python_worker()
    wait_for(lambda: len(interop_jobs.seen()) == len(due))
    for run in interop_jobs.seen():
        jid = run["jid"]
        assert run["ran_at"] >= due[jid], f"{run['args']} ran before it was due"
        # Promoted like a normal push: a fresh enqueued_at, everything else as Ruby wrote it.
        assert run["payload"]["enqueued_at"] >= due[jid]
        assert {k: v for k, v in run["payload"].items() if k != "enqueued_at"} == entries[jid][0]
    assert r.zcard("schedule") == 0


def test_options_and_unknown_keys_reach_the_job_exactly_as_ruby_stored_them(
    rb: Callable[..., Any], r: Any, start_python_worker: Callable[..., Launcher]
) -> None:
    options = {"queue": "wire_opts", "retry": 4, "backtrace": 5, "tags": ["alpha", "βeta"], **UNKNOWN}
    rb(
        op="pushes",
        calls=[
            {"push": {"class": RECORD, "args": [1, "x"], **options}},
            {"push_bulk": {"class": RECORD, "args": [[2], [3]], **options}},
        ],
    )
    jobs = stored(r, "wire_opts")
    assert [job["args"] for job in jobs] == [[1, "x"], [2], [3]]
    assert all(job[k] == v for job in jobs for k, v in options.items())  # Ruby kept them too

    start_python_worker("wire_opts")
    wait_for(lambda: len(interop_jobs.seen()) == 3)
    runs = interop_jobs.seen()
    for run, job in zip(runs, jobs, strict=True):
        # Every key, value, JSON type and the key order: what the job sees is what Ruby wrote.
        assert list(run["payload"]) == list(job)
        assert typed(run["payload"]) == typed(job)


def test_a_failed_ruby_job_keeps_rubys_unknown_keys_in_the_retry_entry_we_write(
    rb: Callable[..., Any], r: Any, start_python_worker: Callable[..., Launcher]
) -> None:
    options = {"queue": "wire_fail", "retry": 3, "backtrace": 2, "tags": ["alpha"], **UNKNOWN}
    [jid] = rb(op="pushes", calls=[{"push": {"class": FAIL, "args": [7, {"k": [1.5]}], **options}}])
    [original] = stored(r, "wire_fail")
    [original_raw] = r.lrange("queue:wire_fail", 0, -1)
    start_python_worker("wire_fail")
    wait_for(lambda: r.zcard("retry") == 1)
    [member] = r.zrange("retry", 0, -1)
    entry = json.loads(member)

    # Ruby's keys first, in Ruby's order and unchanged; then the failure fields, in Sidekiq's order.
    assert list(entry) == [
        *original,
        "error_message",
        "error_class",
        "failed_at",
        "retry_count",
        "error_backtrace",
    ]
    assert typed({k: entry[k] for k in original}) == typed(original)
    assert entry["retry_count"] == 0 and entry["error_class"] == "ValueError"
    frames = wire.decode_backtrace(entry["error_backtrace"])
    assert len(frames) == 2 and "interop_jobs.py" in frames[0]  # `backtrace: 2`: the innermost two

    # Ruby reads our entry: same job, same arguments, our backtrace decoded.
    [seen_by_ruby] = rb(op="set", name="retry")["entries"]
    assert seen_by_ruby["jid"] == jid and seen_by_ruby["klass"] == FAIL
    assert typed(seen_by_ruby["args"]) == typed(original["args"])
    assert seen_by_ruby["tags"] == ["alpha"] and seen_by_ruby["retry_count"] == 0
    assert seen_by_ruby["error_backtrace"] == frames
    assert typed(json.loads(seen_by_ruby["value"])) == typed(entry)
    # Known difference: rewriting a payload re-encodes Ruby's floats the Python way
    # (`1.0e-07` becomes `1e-07`): the same number and JSON type, other bytes.
    assert b'"x-trace":["a",1.0e-07]' in original_raw and b'"x-trace":["a",1e-07]' in member

    # A second failure (the retry promoted by our poller) still carries them.
    r.zadd("retry", {member: time.time() - 1}, xx=True)
    wait_for(lambda: (m := r.zrange("retry", 0, -1)) and json.loads(m[0])["retry_count"] == 1)
    again = json.loads(r.zrange("retry", 0, -1)[0])
    assert typed({k: again[k] for k in original if k != "enqueued_at"}) == typed(
        {k: v for k, v in original.items() if k != "enqueued_at"}
    )
    assert list(again)[: len(original)] == list(original) and again["failed_at"] == entry["failed_at"]
    assert again["retried_at"] >= entry["failed_at"]
