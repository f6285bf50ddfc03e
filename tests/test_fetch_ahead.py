"""Reliable fetch takes a backlog several jobs per round trip, and loses none of them.

One round trip per job is most of a busy worker's cost, so a fetch from a queue with a
backlog moves up to ``FETCH_AT_MOST`` jobs (no more than may start before the next
acknowledgement: ``concurrency``) into the private list at once, and the next fetches of
any thread take them from memory. These tests pin what must not change with it:
a short queue still goes one job per thread, every job taken is held (never mistaken for a
stray), a quieting worker gives back what it did not start, and a worker runs each job once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.core.worker import Launcher
from django_wurk.core.worker.fetch import FETCH_AT_MOST, ReliableFetch, UnitOfWork, fetch_for
from tests.conftest import wait_for
from tests.jobsapp import jobs

PRIVATE = "queue:sq|testhost:1:ahead|default"


def fetcher(wurk: Wurk, config: Config) -> ReliableFetch:
    made = fetch_for(config, wurk.redis, wurk.scripts, "testhost:1:ahead")
    assert isinstance(made, ReliableFetch)
    return made


def args_of(unit: UnitOfWork | None) -> Any:
    assert unit is not None
    return json.loads(unit.raw)["args"][0]


def test_a_backlog_is_taken_several_jobs_per_round_trip_in_order(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    fetch.concurrency = FETCH_AT_MOST  # room for all of them started and unacknowledged (see below)
    unit = fetch.fetch()
    assert args_of(unit) == 0
    assert r.llen(PRIVATE) == FETCH_AT_MOST and r.llen("queue:default") == 40 - FETCH_AT_MOST
    got = [0]
    for _ in range(FETCH_AT_MOST - 1):  # from memory: no round trip, nothing acknowledged yet
        unit = fetch.fetch(unit)
        got.append(args_of(unit))
    assert r.llen(PRIVATE) == FETCH_AT_MOST and len(fetch.held()) == FETCH_AT_MOST
    unit = fetch.fetch(unit)  # the next round trip acknowledges the finished ones
    got.append(args_of(unit))
    assert got == list(range(FETCH_AT_MOST + 1))
    assert r.llen(PRIVATE) == FETCH_AT_MOST  # the one running and the ones taken along
    fetch.acknowledge(unit)
    assert r.llen(PRIVATE) == FETCH_AT_MOST - 1 and len(fetch.held()) == FETCH_AT_MOST - 1
    fetch.release()


def test_no_more_jobs_are_started_and_unacknowledged_than_the_concurrency(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    """What a kill -9 runs again (issue 23, item 3): the running job and the finished ones
    still in the private list are never more than ``concurrency``. Finished jobs wait for the
    next round trip, which then acknowledges them all and takes the next ones along."""
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=3))
    unit = fetch.fetch()
    got = [args_of(unit)]
    assert r.llen(PRIVATE) == 3  # one running, two taken along: as many as may run before an ack
    for _ in range(12):
        unit = fetch.fetch(unit)
        got.append(args_of(unit))
        started = r.llen(PRIVATE) - len(fetch._ready)  # running or finished, still in Redis
        assert started <= 3, f"{started} jobs started and unacknowledged, at most 3"
    assert got == list(range(13))  # in order, none skipped or twice
    fetch.acknowledge(unit)
    fetch.release()
    assert r.llen(PRIVATE) == 0 and r.llen("queue:default") == 40 - 13


def test_jobs_taken_along_and_not_started_go_back_to_the_head_of_their_queue(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    """Every thread of the process is busy: the jobs taken along would wait behind the running
    ones while another process's thread idles, so they go back, first one first (issue 23)."""
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    unit = fetch.fetch()  # this thread is busy with it from now on, the other never comes
    assert args_of(unit) == 0 and r.llen(PRIVATE) == 2
    wait_for(lambda: r.llen(PRIVATE) == 1, timeout=5)  # handed back within HAND_BACK_AFTER or so
    assert fetch.held() == [unit] and r.llen("queue:default") == 39
    assert json.loads(r.lindex("queue:default", -1))["args"] == [1]  # the next to be fetched
    fetch.acknowledge(unit)
    fetch.release()
    assert r.llen(PRIVATE) == 0


def test_a_recovered_job_runs_alone(wurk: Wurk, r: Any, test_config: Config) -> None:
    """A job its worker died running before is started only once nothing else of ours is in
    the private list but other threads' running jobs: if it kills us again, no job that merely
    waited beside it is charged (and, three times over, buried as poison)."""
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=4))
    first = fetch.fetch()
    assert r.llen(PRIVATE) == 4
    # The reaper put a job back at the head of the queue, marked as recovered.
    marked = json.dumps(
        {
            "class": "tests.jobsapp.jobs.echo",
            "args": ["poison?"],
            "jid": "r" * 24,
            "queue": "default",
            "recovered": 1,
        }
    )
    r.rpush("queue:default", marked)
    fetch._ready.clear()  # as if other threads had taken the ready ones (then finished)
    r.ltrim(PRIVATE, -1, -1)
    assert r.lrange(PRIVATE, 0, -1) == [first.raw]
    alone = fetch.fetch(first)
    assert json.loads(alone.raw)["args"] == ["poison?"]
    # The one before acknowledged, nothing taken along: only the recovered job is held.
    assert r.lrange(PRIVATE, 0, -1) == [marked.encode()] and fetch.held() == [alone]
    fetch.acknowledge(alone)
    nxt = fetch.fetch()
    assert r.llen(PRIVATE) == 4  # alone no more: taking along again
    fetch.acknowledge(nxt)
    fetch.release()


def test_a_short_queue_goes_one_job_per_fetch(wurk: Wurk, r: Any, test_config: Config) -> None:
    jobs.echo.perform_bulk([(i,) for i in range(5)])
    fetch = fetcher(wurk, test_config.replace(concurrency=10))  # fewer waiting than threads
    unit = fetch.fetch()
    assert args_of(unit) == 0 and r.llen(PRIVATE) == 1 and r.llen("queue:default") == 4
    fetch.acknowledge(unit)
    fetch.release()


def test_jobs_taken_along_go_back_when_the_thread_ends(wurk: Wurk, r: Any, test_config: Config) -> None:
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    unit = fetch.fetch()
    fetch.acknowledge(unit)
    fetch.release()  # a quieting worker starts no more jobs
    assert r.llen(PRIVATE) == 0 and fetch.held() == []
    # Back at the fetching end, in their order: the next fetch takes job 1.
    assert [json.loads(x)["args"][0] for x in r.lrange("queue:default", -3, -1)] == [3, 2, 1]
    again = fetcher(wurk, test_config.replace(concurrency=100))
    assert args_of(again.fetch()) == 1
    again.release()


def test_jobs_taken_along_are_held_and_only_strays_are_pushed_back(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(concurrency=2))
    manager = Launcher(wurk).manager  # not started: this thread plays a processor
    fetch = manager.fetch
    assert isinstance(fetch, ReliableFetch)
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    unit = fetch.fetch()
    finished = fetch.fetch(unit)  # unit is finished, its acknowledgement not sent yet
    private = fetch.private["default"]
    stray = b'{"class":"echo","args":["stray"],"jid":"0123456789abcdef01234567","queue":"default"}'
    r.lpush(private, stray)  # as a fetch whose reply was lost would leave it
    assert manager.reclaim_strays()
    assert r.llen(private) == 2  # both taken together, running or finished: still there
    assert r.lindex("queue:default", -1) == stray  # the stray alone went back, to be fetched next
    fetch.acknowledge(finished)
    fetch.release()


def test_a_worker_runs_each_job_of_a_backlog_once(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(concurrency=3))
    jobs.echo.perform_bulk([(i,) for i in range(300)])
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: r.llen("seen:echo") == 300)
    finally:
        worker.stop()
    assert sorted(json.loads(x)[0] for x in r.lrange("seen:echo", 0, -1)) == list(range(300))
    assert [k for k in r.keys("queue:*") if b"|" in k] == []  # every private list emptied


def test_after_a_long_job_a_thread_takes_one_job(wurk: Wurk, r: Any, test_config: Config) -> None:
    jobs.echo.perform_bulk([(i,) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    fetch.short_job = 0.0  # every job counts as long
    unit = fetch.fetch()
    unit = fetch.fetch(unit)
    assert args_of(unit) == 1 and r.llen(PRIVATE) == 1  # taken one at a time, acknowledged each time
    fetch.acknowledge(unit)
    fetch.release()


def test_large_jobs_are_taken_along_only_up_to_a_byte_budget(wurk: Wurk, r: Any, test_config: Config) -> None:
    """Holding 8 jobs of 100 KB per thread buys nothing (moving the bytes costs more than the
    round trip saved) and makes every acknowledgement compare longer payloads."""
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    fetch.concurrency = FETCH_AT_MOST
    jobs.echo.perform_bulk([("x" * 100_000, i) for i in range(40)])
    unit = fetch.fetch()
    assert args_of(unit) == "x" * 100_000 and r.llen(PRIVATE) == 1  # alone: over the budget by itself
    unit = fetch.fetch(unit)
    assert r.llen(PRIVATE) == 1  # the previous one acknowledged, the next one taken alone
    fetch.acknowledge(unit)
    r.delete("queue:default")
    jobs.echo.perform_bulk([("y" * 20_000, i) for i in range(40)])
    unit = fetch.fetch()
    # 20 KB each: taken along until the jobs taken hold TAKE_ALONG_BYTES (64 KB), so four.
    assert r.llen(PRIVATE) == 4 and len(fetch.held()) == 4
    for _ in range(3):
        unit = fetch.fetch(unit)  # from memory
    assert r.llen(PRIVATE) == 4
    unit = fetch.fetch(unit)  # the round trip acknowledges the four, and takes four more
    assert r.llen(PRIVATE) == 4 and r.llen("queue:default") == 40 - 8
    fetch.acknowledge(unit)
    fetch.release()


@pytest.mark.parametrize("pad", [0, 5_000], ids=["small, acknowledged in the script", "large, own LREM"])
def test_acknowledgements_survive_a_flushed_script_cache(
    wurk: Wurk, r: Any, test_config: Config, pad: int
) -> None:
    """A small finished job is acknowledged inside the fetch script; a large one by an LREM
    written just before it, in the same round trip. When the script is gone (a restarted
    Redis, SCRIPT FLUSH) every one of them is acknowledged all the same, once, and the fetch
    loads the script and takes the next jobs."""
    jobs.echo.perform_bulk([(i, "x" * pad) for i in range(40)])
    fetch = fetcher(wurk, test_config.replace(concurrency=2))
    fetch.concurrency = FETCH_AT_MOST  # room for a whole batch started and unacknowledged
    unit = fetch.fetch()
    for _ in range(FETCH_AT_MOST - 1):
        unit = fetch.fetch(unit)
    r.script_flush()
    unit = fetch.fetch(unit)  # acknowledges the 8 finished ones, reloads the script, takes 8 more
    assert args_of(unit) == FETCH_AT_MOST
    assert r.llen(PRIVATE) == FETCH_AT_MOST and len(fetch.held()) == FETCH_AT_MOST
    assert r.llen("queue:default") == 40 - 2 * FETCH_AT_MOST
    for _ in range(FETCH_AT_MOST - 1):
        unit = fetch.fetch(unit)
    unit = fetch.fetch(unit)  # and the next round trip, with the script loaded
    assert args_of(unit) == 2 * FETCH_AT_MOST and r.llen(PRIVATE) == FETCH_AT_MOST
    fetch.acknowledge(unit)
    fetch.release()
    # Nothing acknowledged twice or left behind: 17 jobs done, the 7 taken along back in the queue.
    assert r.llen(PRIVATE) == 0 and r.llen("queue:default") == 40 - 17


def test_jobs_that_wait_for_io_run_side_by_side_after_short_jobs_parked_the_threads(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    """A backlog of short computing jobs runs on one thread while the others park (they could
    only wait for the GIL, holding started jobs); jobs that wait for I/O next must still run
    ``concurrency`` at a time: the watcher wakes the parked threads (a parked thread that woke
    by itself, after ``park_at_most``, would be too late here)."""
    wurk.configure(test_config.replace(concurrency=4))
    jobs.computes.perform_bulk([(100,)] * 3000)
    jobs.overlapping.perform_bulk([("io", 0.25)] * 12)
    worker = Launcher(wurk)
    assert isinstance(worker.manager.fetch, ReliableFetch)
    worker.manager.fetch.park_at_most = 30.0  # only the watcher wakes a parked thread in time
    worker.start()
    try:
        wait_for(lambda: r.llen("seen:overlap-io") == 12, timeout=60)
    finally:
        worker.stop()
    assert max(json.loads(x) for x in r.lrange("seen:overlap-io", 0, -1)) == 4
