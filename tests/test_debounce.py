"""Debounce and throttle (``@job(debounce=..., debounce_max=...)``, ``@job(throttle=...)``)
on a real Redis, with real workers.

What a burst collapses to (one schedule entry, the last payload, the burst's jid), when it
fires (``wait`` after the last push, ``max_wait`` after the first, on Redis's clock), what a
throttle admits (the first push of each slot; the others get the holder's jid), pushes racing
from threads and from processes, pushes inside a database transaction (decided at the
commit), and the option checks. The kill -9 of a worker holding such a job is in
``faults/test_collapse_kill.py``; junk in the keys in ``hostile/test_corpus_collapse.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from django_wurk import Batch, BatchStatus, Job, Wurk, job
from django_wurk.api import JobStatus
from django_wurk.core.features.collapse import TOKEN, debounce_key, digest, throttle_prefix
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp.collapse_jobs import (
    keyed_an_hour,
    ping,
    pong,
    rebuild_search,
    reindex,
    runs,
    waits_an_hour,
)

ROOT = Path(__file__).resolve().parent.parent


def scheduled(r: Any) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(m), score) for m, score in r.zrange("schedule", 0, -1, withscores=True)]


def queued(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def server_time(r: Any) -> float:
    seconds, micros = r.time()
    return float(seconds + micros / 1_000_000)


def never_defined(n: int) -> None:
    """The function the option checks try to make a job of (refused every time)."""


# Options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": -1}, "debounce must be seconds"),
        ({"debounce": "5s"}, "debounce must be seconds"),
        ({"debounce": float("nan")}, "debounce must be seconds"),
        ({"debounce": 5, "debounce_max": -1}, "debounce_max must be seconds"),
        ({"debounce": 10, "debounce_max": 5}, r"debounce_max \(5\) must be at least debounce \(10\)"),
        ({"debounce_max": 5}, "debounce_max needs debounce"),
        ({"throttle": 0}, "throttle must be seconds"),
        ({"throttle": True}, "throttle must be seconds"),
        ({"debounce": 5, "throttle": 5}, "debounce and throttle cannot be used together"),
        ({"throttle": 5, "unique_for": 60}, "throttle and unique_for cannot be used together"),
        ({"debounce": 5, "unique_for": 60}, "debounce and unique_for cannot be used together"),
        ({"collapse_key": "k"}, "collapse_key needs debounce or throttle"),
        ({"debounce": 5, "collapse_key": ""}, "collapse_key must be a non-empty string"),
        ({"debounce": 5, "collapse_key": 7}, "collapse_key must be a non-empty string"),
    ],
)
def test_bad_options_fail_at_definition_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job(**options)(never_defined)

    with pytest.raises(ValueError, match=message):
        # The options as class attributes, like ``queue``.
        type("CollapsedBadly", (Job,), {**options, "perform": lambda self, n: None}, abstract=True)


def test_set_checks_its_options_together_with_the_class_defaults() -> None:
    with pytest.raises(ValueError, match="debounce and throttle cannot be used together"):
        reindex.set(throttle=10)
    assert reindex.set(debounce_max=1) is not None  # 1 >= the class's 0.5
    with pytest.raises(ValueError, match=r"debounce_max \(0.25\) must be at least debounce \(0.5\)"):
        reindex.set(debounce_max=0.25)
    assert reindex.set(debounce=None, debounce_max=None, throttle=10) is not None  # debounce off


def test_set_debounce_max_below_the_class_debounce_fails() -> None:
    with pytest.raises(ValueError, match="debounce_max"):
        waits_an_hour.set(debounce_max=60)


# Debounce --------------------------------------------------------------------------------------


def test_a_burst_collapses_into_one_entry_under_the_first_jid(wurk: Wurk, r: Any) -> None:
    before = server_time(r)
    jids = [waits_an_hour.perform_async(7, "same") for _ in range(5)]
    after = server_time(r)
    assert len(set(jids)) == 1 and jids[0] is not None  # every push answers the burst's jid
    [(entry, score)] = scheduled(r)
    assert entry["jid"] == jids[0] and entry["args"] == [7, "same"]
    assert entry["class"] == waits_an_hour.wire_name and "enqueued_at" not in entry
    assert entry[TOKEN] == digest(entry)
    # ``wait`` after the last push, on the server's clock.
    assert before + 3600 <= score <= after + 3600
    burst = r.hgetall(debounce_key(digest(entry)))
    assert burst[b"jid"].decode() == jids[0]
    assert json.loads(burst[b"member"]) == entry
    assert before <= float(burst[b"first"]) <= after
    assert 3600 < r.pttl(debounce_key(digest(entry))) / 1000 <= 3600 + 61


def test_the_last_payload_wins_under_a_collapse_key(wurk: Wurk, r: Any) -> None:
    jids = [keyed_an_hour.perform_async(note) for note in ("a", "b", "c")]
    assert len(set(jids)) == 1
    [(entry, _)] = scheduled(r)
    assert entry["args"] == ["c"] and entry["jid"] == jids[0]


def test_other_arguments_are_other_bursts(wurk: Wurk, r: Any) -> None:
    a, b = waits_an_hour.perform_async(1), waits_an_hour.perform_async(2)
    assert a != b
    assert sorted(e["args"][0] for e, _ in scheduled(r)) == [1, 2]


def test_max_wait_caps_the_fire_time_from_the_first_push(wurk: Wurk, r: Any) -> None:
    jid = waits_an_hour.perform_async(3)
    [(entry, _)] = scheduled(r)
    key = debounce_key(digest(entry))
    began = server_time(r) - 7000  # as though the burst began 7000 s ago
    r.hset(key, "first", f"{began:.6f}")
    assert waits_an_hour.perform_async(3) == jid
    [(_, score)] = scheduled(r)
    assert score == pytest.approx(began + 7200, abs=0.01)  # not now + 3600


def test_a_burst_that_fired_is_over_and_the_next_push_starts_another(wurk: Wurk, r: Any) -> None:
    first = waits_an_hour.perform_async(4)
    r.delete("schedule")  # the poller took it (or someone deleted it): the burst is over
    second = waits_an_hour.perform_async(4)
    assert second != first
    [(entry, _)] = scheduled(r)
    assert entry["jid"] == second


def test_a_scheduled_push_fires_no_earlier_than_its_time(wurk: Wurk, r: Any) -> None:
    before = server_time(r)
    waits_an_hour.perform_in(5000, 5)
    [(_, score)] = scheduled(r)
    assert score >= before + 5000 - 1  # its own time, not the debounce's hour


def test_debounce_none_pushes_a_plain_job(wurk: Wurk, r: Any) -> None:
    plain = waits_an_hour.set(debounce=None, debounce_max=None)
    a, b = plain.perform_async(6), plain.perform_async(6)
    assert a != b and [p["jid"] for p in queued(r)] == [a, b]
    assert r.zcard("schedule") == 0


def test_perform_bulk_collapses_within_the_bulk(wurk: Wurk, r: Any) -> None:
    jids = keyed_an_hour.perform_bulk([["x"], ["y"], ["z"]])
    assert len(set(jids)) == 1
    [(entry, _)] = scheduled(r)
    assert entry["args"] == ["z"] and entry["jid"] == jids[0]


def test_a_worker_runs_a_burst_once_with_the_last_payload(wurk: Wurk, r: Any, workers: Launcher) -> None:
    jids = [rebuild_search.perform_async(note) for note in ("one", "two", "three")]
    assert len(set(jids)) == 1
    wait_for(lambda: runs("rebuild_search"), timeout=30)
    # Nothing else is left to run: no entry, no queue, no private list.
    wait_for(lambda: r.zcard("schedule") == 0 and r.llen("queue:default") == 0)
    wait_for(lambda: all(r.llen(k) == 0 for k in r.scan_iter(match="queue:sq|*")))
    assert runs("rebuild_search") == ["three"]
    reindex.perform_async(9)
    wait_for(lambda: runs("reindex") == [9], timeout=30)


def test_threads_racing_collapse_into_one_entry(wurk: Wurk, r: Any) -> None:
    barrier = threading.Barrier(10)
    results: list[str | None] = []

    def push(n: int) -> None:
        barrier.wait()
        results.append(keyed_an_hour.perform_async(f"thread {n}"))

    threads = [threading.Thread(target=push, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10 and len(set(results)) == 1
    [(entry, _)] = scheduled(r)
    assert entry["jid"] == results[0] and entry["args"][0].startswith("thread ")
    assert json.loads(r.hget(debounce_key(digest(entry)), "member")) == entry
    # The last push after the race wins.
    assert keyed_an_hour.perform_async("last") == results[0]
    [(entry, _)] = scheduled(r)
    assert entry["args"] == ["last"]


PUSHER = """
import json, sys, threading, time
from django_wurk import Config, wurk
from tests.jobsapp.collapse_jobs import {name}

wurk.configure(Config(redis_url=sys.argv[1]))
r = wurk.redis
r.rpush("pushers:ready", 1)
deadline = time.monotonic() + 20
while not r.exists("pushers:go"):
    if time.monotonic() > deadline:
        sys.exit("never told to go")
    time.sleep(0.001)
results = []
def push(n):
    results.append({name}.perform_async(sys.argv[2] + "-" + str(n)))
threads = [threading.Thread(target=push, args=(n,)) for n in range(5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(results))
"""


def race(r: Any, redis_url: str, name: str) -> list[str | None]:
    """Three processes of five threads each push ``name`` at once; every answer."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PUSHER.format(name=name), redis_url, f"p{i}"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for i in range(3)
    ]
    try:
        wait_for(lambda: r.llen("pushers:ready") == 3, timeout=60)
        r.set("pushers:go", 1)
        outputs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [jid for out in outputs for jid in json.loads(out)]


def test_processes_racing_collapse_into_one_entry_with_one_of_their_payloads(
    wurk: Wurk, r: Any, redis_url: str
) -> None:
    results = race(r, redis_url, "keyed_an_hour")
    assert len(results) == 15 and len(set(results)) == 1 and results[0] is not None
    [(entry, _)] = scheduled(r)
    assert entry["jid"] == results[0]
    pushed = {f"p{i}-{n}" for i in range(3) for n in range(5)}
    assert entry["args"][0] in pushed


@pytest.mark.django_db(transaction=True)
def test_a_transaction_s_pushes_collapse_at_its_commit_and_a_rollback_leaves_nothing(
    wurk: Wurk, r: Any
) -> None:
    with transaction.atomic():
        keyed_an_hour.perform_async("in a transaction")
        keyed_an_hour.perform_async("its last")
        assert r.zcard("schedule") == 0 and not list(r.scan_iter(match="debounce:*"))
    [(entry, _)] = scheduled(r)
    assert entry["args"] == ["its last"]
    with pytest.raises(RuntimeError), transaction.atomic():
        keyed_an_hour.perform_async("rolled back")
        raise RuntimeError("roll back")
    [(entry, _)] = scheduled(r)
    assert entry["args"] == ["its last"]  # the rolled-back push extended nothing


# Throttle ----------------------------------------------------------------------------------------


def test_the_first_push_of_a_slot_is_admitted_and_the_others_get_its_jid(wurk: Wurk, r: Any) -> None:
    first = ping.perform_async(1)
    assert first is not None
    assert [ping.perform_async(1) for _ in range(3)] == [first] * 3
    assert [p["jid"] for p in queued(r)] == [first]
    assert queued(r)[0][TOKEN] == digest(queued(r)[0])
    other = ping.perform_async(2)  # other arguments: another slot key
    assert other not in (None, first)


def test_the_slot_key_is_aligned_on_redis_time_and_expires_at_the_slot_end(wurk: Wurk, r: Any) -> None:
    now = server_time(r)
    jid = ping.perform_async(5)
    index = int(now // 100_000_000)
    key = throttle_prefix(digest(queued(r)[0])) + str(index)
    assert r.get(key).decode() == jid
    assert 0 < r.pttl(key) / 1000 <= (index + 1) * 100_000_000 - now + 1


def test_a_new_slot_admits_again(wurk: Wurk, r: Any) -> None:
    every_second = ping.set(throttle=1)
    first = every_second.perform_async(8)
    # Polled, not slept: within a second or two the slot ends and a push is admitted again.
    later = wait_for(lambda: (jid := every_second.perform_async(8)) != first and jid, timeout=10)
    assert later not in (None, first)
    assert {p["jid"] for p in queued(r)} == {first, later}


def test_the_holder_pushing_its_own_job_again_is_admitted(wurk: Wurk, r: Any) -> None:
    jid = ping.perform_async(6)
    [payload] = queued(r)
    again = {k: v for k, v in payload.items() if k not in (TOKEN, "enqueued_at")}
    assert wurk.writer.push([again], None) in (None, [])  # an on-commit retry, an outbox relay
    assert [p["jid"] for p in queued(r)] == [jid, jid]


def test_perform_bulk_throttles_within_the_bulk(wurk: Wurk, r: Any) -> None:
    jids = pong.perform_bulk([["a"], ["b"], ["c"]])
    assert len(set(jids)) == 1 and [p["args"] for p in queued(r)] == [["a"]]


def test_threads_racing_admit_one(wurk: Wurk, r: Any) -> None:
    barrier = threading.Barrier(10)
    results: list[str | None] = []

    def push() -> None:
        barrier.wait()
        results.append(ping.perform_async(77))

    threads = [threading.Thread(target=push) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10 and len(set(results)) == 1
    assert [p["jid"] for p in queued(r)] == [results[0]]


def test_processes_racing_admit_one(wurk: Wurk, r: Any, redis_url: str) -> None:
    results = race(r, redis_url, "pong")
    assert len(results) == 15 and len(set(results)) == 1 and results[0] is not None
    assert [p["jid"] for p in queued(r)] == [results[0]]


@pytest.mark.django_db(transaction=True)
def test_a_throttled_push_in_a_transaction_takes_no_slot_until_the_commit(wurk: Wurk, r: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        pong.perform_async("rolled back")
        raise RuntimeError("roll back")
    assert not list(r.scan_iter(match="throttle:*"))
    with transaction.atomic():
        inside = pong.perform_async("committed")
    assert [p["jid"] for p in queued(r)] == [inside]
    assert pong.perform_async("after") == inside


def test_a_tracked_burst_has_no_enqueued_state_and_succeeds_under_its_jid(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    tracked = rebuild_search.set(track=True)
    jids = {tracked.perform_async(note) for note in ("first", "last")}
    assert len(jids) == 1
    (jid,) = jids
    assert JobStatus.get(jid) is None  # written by the collapse, not the writer: not "enqueued"
    wait_for(lambda: (status := JobStatus.get(jid)) is not None and status.state == "succeeded", timeout=30)
    assert runs("rebuild_search") == ["last"]


def test_a_throttled_duplicate_is_never_enqueued_in_job_status(wurk: Wurk, r: Any) -> None:
    tracked = pong.set(track=True)
    first, second = tracked.perform_async("a"), tracked.perform_async("b")
    assert first == second
    status = JobStatus.get(first)
    assert status is not None and status.state == "enqueued"
    assert len(list(r.scan_iter(match="status:*"))) == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"debounce": "5"},
        {"debounce": -1},
        {"debounce": 5, "debounce_max": "x"},
        {"throttle": 0},
        {"throttle": [1]},
        {"debounce": 5, "throttle": 5},
        {"debounce": 5, "jid": 'a"b'},
        {"throttle": 5, "jid": "x" * 65},
        {"debounce": 10**400},
    ],
    ids=repr,
)
def test_another_producer_s_unusable_options_push_a_plain_job(
    wurk: Wurk, r: Any, changes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """An outbox row or a hand-made push the checks never saw: written as a plain job, with
    a warning, never dropped."""
    payload = {"class": keyed_an_hour.wire_name, "args": ["x"], "queue": "default", **changes}
    jid = wurk.client.push(payload)
    assert [p["jid"] for p in queued(r)] == [jid] and r.zcard("schedule") == 0
    assert any("pushed as a plain job" in rec.getMessage() for rec in caplog.records)
    assert not list(r.scan_iter(match="debounce:*")) and not list(r.scan_iter(match="throttle:*"))


def test_inside_a_batch_a_collapsed_job_is_pushed_plain(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch counts the jobs its block writes, so none of them is collapsed away."""
    batch = Batch(description="collapse in a batch")
    with batch.jobs():
        a = keyed_an_hour.perform_async("a")
        b = keyed_an_hour.perform_async("b")
        c = pong.perform_async("c")
        d = pong.perform_async("d")
    assert len({a, b, c, d}) == 4
    assert {p["jid"] for p in queued(r)} == {a, b, c, d} and r.zcard("schedule") == 0
    assert BatchStatus(batch.bid).total == 4
    assert sum("it belongs to a batch" in rec.getMessage() for rec in caplog.records) == 4
