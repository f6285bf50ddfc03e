"""``async def`` jobs: run to the end on a real worker and in the testing modes, never counted
as done without running.

Each thread that runs jobs keeps one event loop for them (``django_wurk.core.coroutines``), so
these tests also check the loop is shared by the jobs of one thread and closed with it.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Config, Job, Wurk, job
from django_wurk.core.worker import Launcher
from django_wurk.testing import FakeQueues
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.jobsapp.testing_jobs import async_collect, async_explode, calls


@pytest.fixture
def one_thread_worker(wurk: Wurk, test_config: Config) -> Iterator[Launcher]:
    wurk.configure(test_config.replace(concurrency=1))
    jobs.async_loops.clear()
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


# On a real worker ------------------------------------------------------------------------


def test_an_async_def_job_runs_to_the_end_on_a_worker(
    wurk: Wurk, r: Any, one_thread_worker: Launcher
) -> None:
    jobs.async_echo.perform_async("a", 1)
    jobs.AsyncPerform.perform_async(7)
    wait_for(lambda: len(seen(r, "async_echo")) == 1 and len(seen(r, "AsyncPerform")) == 1)
    assert seen(r, "async_echo") == [{"args": ["a", 1], "thread": "wurk-processor-0"}]
    assert seen(r, "AsyncPerform")[0]["n"] == 7
    wait_for(lambda: r.get("stat:processed") == b"2")
    assert r.get("stat:failed") is None and r.zcard("retry") == 0


def test_an_async_job_that_raises_goes_to_the_retry_set_with_its_error(
    wurk: Wurk, r: Any, one_thread_worker: Launcher
) -> None:
    jid = jobs.async_fails.perform_async(3)
    wait_for(lambda: r.zcard("retry") == 1)
    [member] = r.zrange("retry", 0, -1)
    entry = json.loads(member)
    assert entry["jid"] == jid and entry["retry_count"] == 0
    assert (entry["error_class"], entry["error_message"]) == ("ValueError", "async boom 3")
    wait_for(lambda: r.get("stat:failed") == b"1")


def test_a_sync_function_returning_a_coroutine_has_it_run(
    wurk: Wurk, r: Any, one_thread_worker: Launcher
) -> None:
    """The documented choice: whatever ``perform`` returns that can be awaited is awaited."""
    jobs.returns_a_coroutine.perform_async(5)
    wait_for(lambda: seen(r, "returns_a_coroutine") == [5])


def test_the_jobs_of_one_thread_share_one_loop_closed_when_the_thread_ends(wurk: Wurk, r: Any) -> None:
    jobs.async_loops.clear()
    wurk.configure(wurk.config.replace(concurrency=1))
    worker = Launcher(wurk)
    worker.start()
    try:
        for i in range(3):
            jobs.async_echo.perform_async(i)
        wait_for(lambda: len(jobs.async_loops) == 3)
        first = jobs.async_loops[0]
        assert all(loop is first for loop in jobs.async_loops) and not first.is_closed()
    finally:
        worker.stop()
    assert first.is_closed()


# In the testing modes ---------------------------------------------------------------------


def test_drain_and_perform_one_run_async_jobs(wurk_fake: FakeQueues) -> None:
    calls.clear()
    async_collect.perform_async(1, 2)
    async_collect.perform_async(3)
    assert wurk_fake.perform_one(async_collect) == 2
    assert wurk_fake.drain() == 1
    assert calls == [("async_collect", [1, 2]), ("async_collect", [3])]


def test_drain_propagates_an_async_jobs_exception(wurk_fake: FakeQueues) -> None:
    calls.clear()
    async_explode.perform_async("late")
    with pytest.raises(RuntimeError, match="late"):
        wurk_fake.drain()
    assert calls == [("async_explode", "late")]


def test_inline_mode_and_perform_inline_run_async_jobs(wurk_inline: None) -> None:
    calls.clear()
    async_collect.perform_async("x")
    assert async_collect.perform_inline("y", "z") == 2
    assert calls == [("async_collect", ["x"]), ("async_collect", ["y", "z"])]
    with pytest.raises(RuntimeError, match="boom"):
        async_explode.perform_async("boom")


def test_an_async_job_cannot_run_inline_inside_a_running_loop_and_says_why() -> None:
    calls.clear()

    async def from_async_code() -> None:
        async_collect.perform_inline(1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited" either
        with pytest.raises(RuntimeError, match="running event loop"):
            asyncio.run(from_async_code())
    assert calls == []


# Refused at definition --------------------------------------------------------------------


def generator_job() -> Iterator[int]:
    yield 1


async def async_generator_job() -> Any:
    yield 1


def test_generator_functions_are_refused_at_decoration() -> None:
    """Calling one only builds a generator; its body would never run and the job would look done."""
    for fn in (generator_job, async_generator_job):
        with pytest.raises(ValueError, match="generator"):
            job(fn)


def test_a_generator_perform_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(ValueError, match="generator"):

        class Yields(Job, abstract=True):
            def perform(self) -> Iterator[int]:
                yield 1


def test_a_generator_returned_at_run_time_fails_the_job(wurk: Wurk, wurk_fake: FakeQueues) -> None:
    class ReturnsGenerator(Job):
        wire_name = "tests.ReturnsGenerator"

        def perform(self) -> Any:
            return (i for i in range(3))

    try:
        ReturnsGenerator.perform_async()
        with pytest.raises(TypeError, match="generator"):
            wurk_fake.drain()
    finally:
        wurk.registry.unregister("tests.ReturnsGenerator")


def test_a_hard_shutdown_interrupts_an_async_job_asleep_on_its_loop(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(concurrency=1, timeout=0.3))
    worker = Launcher(wurk)
    worker.start()
    jid = jobs.async_sleeps.perform_async(120)
    wait_for(lambda: seen(r, "async_sleeps-start") == [120])
    worker.stop()
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]
    # Woken, not left in select() for two minutes: the thread ends, the job's finally ran.
    thread = worker.manager.processors[0].thread
    wait_for(lambda: not thread.is_alive(), timeout=5)
    assert seen(r, "async_sleeps-ended") == [120]
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
