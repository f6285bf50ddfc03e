"""Priority inside a queue (issue 26): where prioritised jobs wait, the order they run in, and
how readers show a queue with priorities as one queue."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Job, Wurk, job
from django_wurk.core import api, priority, wire
from django_wurk.core.config import Config, QueueSpec
from django_wurk.core.features.observability.reading import read
from django_wurk.core.worker import Launcher
from tests.conftest import queue_entries, wait_for
from tests.jobsapp import jobs


@job(queue="ranked", priority=20)
def urgent(n: int) -> None:
    jobs.record("ranked", n)


class Ranked(Job):
    queue = "ranked"
    priority = -3

    def perform(self, n: int) -> None:
        jobs.record("ranked", n)


@job(queue="ranked")
def ranked(n: int) -> None:
    jobs.record("ranked", n)


def runs(r: Any, name: str = "ranked") -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


@pytest.fixture
def one_thread(wurk: Wurk, test_config: Config) -> Iterator[Any]:
    """Start (when called) a worker of one thread on ``ranked`` and ``default``."""
    started: list[Launcher] = []

    def start() -> Launcher:
        wurk.configure(test_config.replace(concurrency=1, queues=(QueueSpec("ranked"), QueueSpec("default"))))
        launcher = Launcher(wurk)
        launcher.start()
        started.append(launcher)
        return launcher

    yield start
    for launcher in started:
        launcher.stop()


# Validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [101, -101, 1.5, "5", True, None])
def test_a_priority_that_is_not_an_int_from_minus_100_to_100_is_refused_naming_it(
    wurk: Wurk, bad: Any
) -> None:
    with pytest.raises(ValueError, match=r"priority must be an integer from -100 to 100"):
        ranked.set(priority=bad)


def test_a_bad_class_priority_fails_at_definition() -> None:
    with pytest.raises(ValueError, match="priority must be an integer"):

        class TooHigh(Job, abstract=True):
            priority = 500


# Where jobs wait ---------------------------------------------------------------------------


def test_priority_0_is_written_exactly_as_before(wurk: Wurk, r: Any) -> None:
    ranked.perform_async(1)
    ranked.set(priority=0).perform_async(2)
    urgent.set(priority=0).perform_async(3)
    assert r.smembers("queues") == {b"ranked"}
    payloads = queue_entries(r, "ranked")
    assert [p["args"] for p in payloads] == [[3], [2], [1]]
    assert all("priority" not in p for p in payloads)


def test_a_prioritised_job_waits_in_its_queues_priority_list(wurk: Wurk, r: Any) -> None:
    urgent.perform_async(1)
    Ranked.perform_async(2)
    ranked.set(priority=7).perform_bulk([(3,), (4,)])
    assert r.smembers("queues") == {b"ranked@20", b"ranked@-3", b"ranked@7"}
    [first] = queue_entries(r, "ranked@20")
    assert first["queue"] == "ranked" and first["priority"] == 20
    assert [p["args"] for p in queue_entries(r, "ranked@7")] == [[4], [3]]
    assert queue_entries(r, "ranked@-3")[0]["priority"] == -3
    assert r.llen("queue:ranked") == 0


def test_a_scheduled_prioritised_job_is_promoted_to_its_priority_list(wurk: Wurk, r: Any) -> None:
    ranked.set(priority=4).perform_in(60, 1)
    assert api.ScheduledSet(wurk).add_all_to_queue() == 1
    [payload] = queue_entries(r, "ranked@4")
    assert payload["args"] == [1] and payload["queue"] == "ranked"


def test_another_producers_junk_priority_keeps_the_job_on_its_queue(wurk: Wurk, r: Any) -> None:
    """A ``priority`` no client of ours writes must not lose the job: it waits as priority 0."""
    for junk in ("high", 1e300, 3.0, 1000, [1], None, True):
        entry = {"class": "x", "args": [], "jid": wire.new_jid(), "queue": "ranked", "priority": junk}
        r.zadd("schedule", {json.dumps(entry): 0})
    assert api.ScheduledSet(wurk).add_all_to_queue() == 7
    assert r.llen("queue:ranked") == 7 and r.smembers("queues") == {b"ranked"}


def test_names_split_and_group_only_for_canonical_priorities() -> None:
    assert priority.split("critical@10") == ("critical", 10)
    assert priority.split("a@b@-100") == ("a@b", -100)
    for plain in (
        "critical",
        "critical@0",
        "critical@05",
        "critical@+5",
        "critical@101",
        "@5",
        "x@",
        "x@1e2",
    ):
        assert priority.split(plain) == (plain, 0)
    grouped = priority.group([b"q@5", b"q", b"q@-2", b"r@3", b"\xff@3", b"s@0"])
    assert grouped == {
        b"q": [b"q@5", b"q", b"q@-2"],
        b"r": [b"r@3", b"r"],
        b"\xff@3": [b"\xff@3"],
        b"s@0": [b"s@0"],
    }


def test_idle_threads_wait_on_the_queues_own_lists_first() -> None:
    plain = ["q", "r"]
    assert priority.waiting_order(plain) is plain
    assert priority.waiting_order(["q@5", "q", "q@-5", "r"]) == ["q", "r", "q@5", "q@-5"]


# The order jobs run in ---------------------------------------------------------------------


def test_higher_priority_runs_first_and_equal_ones_in_push_order(wurk: Wurk, r: Any, one_thread: Any) -> None:
    ranked.perform_async(0)
    ranked.set(priority=-5).perform_async(-5)
    ranked.set(priority=10).perform_async(10)
    ranked.set(priority=3).perform_async(3)
    ranked.set(priority=10).perform_async(11)
    ranked.perform_async(1)
    one_thread()
    wait_for(lambda: len(runs(r)) == 6)
    assert runs(r) == [10, 11, 3, 0, 1, -5]


def test_a_priority_first_used_while_the_worker_runs_is_served(wurk: Wurk, r: Any, one_thread: Any) -> None:
    one_thread()
    ranked.set(priority=-40).perform_async(1)
    wait_for(lambda: runs(r) == [1], timeout=15)


def test_a_failed_prioritised_job_is_retried_into_its_priority_list(
    wurk: Wurk, r: Any, one_thread: Any
) -> None:
    jobs.always_fails.set(queue="ranked", priority=9).perform_async(1)
    one_thread()
    [member] = wait_for(lambda: r.zrange("retry", 0, -1))
    payload = json.loads(member)
    assert payload["queue"] == "ranked" and payload["priority"] == 9
    r.zadd("retry", {member: 0})  # due now: the poller promotes it to queue:ranked@9, and it runs again
    wait_for(lambda: any(json.loads(m).get("retry_count") == 1 for m in r.zrange("retry", 0, -1)))


# Readers show one queue ------------------------------------------------------------------------


def test_the_data_api_reads_a_queue_with_priorities_as_one_queue(wurk: Wurk, r: Any) -> None:
    old = time.time() - 100
    r.lpush("queue:ranked", json.dumps({"class": "x", "args": [0], "jid": "a" * 24, "enqueued_at": old}))
    r.sadd("queues", "ranked")
    ranked.set(priority=5).perform_async(5)
    ranked.set(priority=-5).perform_async(-5)
    [queue] = api.Queue.all(wurk)
    assert queue.name == "ranked" and queue.size() == 3
    assert queue.lists == [b"ranked@5", b"ranked", b"ranked@-5"]
    assert 99 < queue.latency() < 200  # the oldest job's, whichever list holds it
    assert [rec.args for rec in queue.page(0, 10)] == [[-5], [0], [5]]  # the last to run first
    assert [rec.args for rec in queue.page(1, 1)] == [[0]]
    assert [rec.args for rec in queue] == [[-5], [0], [5]]
    found = api.Queue("ranked", wurk).find_job(json.loads(r.lindex("queue:ranked@5", 0))["jid"])
    assert found is not None and api.Queue("ranked", wurk).delete_job(found)
    assert api.Queue("ranked", wurk).size() == 2
    [summary] = api.queue_summaries(wurk)
    assert (summary.name, summary.size) == ("ranked", 2) and summary.latency > 99
    assert api.Stats(wurk).queues == {"ranked": 2}
    [gauge] = read(r).shown
    assert (gauge.name, gauge.size) == ("ranked", 2) and gauge.latency > 99
    api.Queue("ranked", wurk).clear()
    assert r.smembers("queues") == set() and not r.exists("queue:ranked", "queue:ranked@-5")


def test_a_batchs_prioritised_job_waits_in_its_priority_list(wurk: Wurk, r: Any) -> None:
    from django_wurk import Batch

    batch = Batch(description="prioritised")
    with batch.jobs():
        ranked.set(priority=6).perform_async(1)
        ranked.perform_async(2)
    assert [p["args"] for p in queue_entries(r, "ranked@6")] == [[1]]
    assert [p["args"] for p in queue_entries(r, "ranked")] == [[2]]
    assert {b"ranked", b"ranked@6"} <= r.smembers("queues")
