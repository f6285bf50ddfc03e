"""Iterable jobs: walk a cursor, save it, resume after a stop or a crash instead of starting over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core.features.iterable import IterationState, UnreadableIterationState
from django_wurk.iterable import queryset_enumerator
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import identity_of, start, stop_later  # noqa: F401 (a fixture)

ITEMS = 60


def walked(r: Any) -> list[int]:
    return [int(x) for x in r.lrange("seen:walker", 0, -1)]


def test_term_saves_the_cursor_and_the_job_resumes_there(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    proc = start(redis_url, "-c", "1", "-t", "20")
    stop_later.append(proc)
    identity_of(r, proc.pid)
    jid = jobs.Walker.perform_async(ITEMS, 0.05)
    wait_for(lambda: r.llen("seen:walker") >= 10, timeout=30)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    # The job left between two items: nothing was cut short (no hard push-back after the
    # timeout), it went back to its queue, and its cursor is exactly the items done.
    assert "unfinished job(s) back" not in stderr
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]
    done = walked(r)
    assert done == list(range(len(done)))
    state = r.hgetall(f"it-{jid}")
    assert int(state[b"c"]) == len(done) < ITEMS and state[b"ex"] == b"1"
    assert not r.exists("seen:walker-done")

    successor = start(redis_url, "-c", "1")
    stop_later.append(successor)
    wait_for(lambda: r.llen("seen:walker-done") == 1, timeout=60)
    assert walked(r) == list(range(ITEMS))  # no item twice, none skipped
    # The state is gone once the job is complete (cleared after on_complete, which recorded "done").
    wait_for(lambda: not r.exists(f"it-{jid}"))
    successor.send_signal(signal.SIGTERM)
    successor.communicate(timeout=30)


def test_after_kill_9_the_job_resumes_from_the_last_checkpoint(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    proc = start(redis_url, "-c", "1")
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    jid = jobs.Walker.perform_async(ITEMS, 0.05)
    wait_for(lambda: r.exists(f"it-{jid}") and r.llen("seen:walker") >= 15, timeout=30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    first_run = walked(r)
    checkpoint = int(r.hget(f"it-{jid}", "c"))
    # Saved every 0.2 s: at most that much work (four 0.05 s items, and one more under way) is
    # done after it, and that is all that runs again.
    assert 0 < checkpoint <= len(first_run) <= checkpoint + 6
    r.delete(identity)  # dead as far as the reaper is concerned (its hash would expire in 60 s)

    successor = start(redis_url, "-c", "1")
    stop_later.append(successor)
    wait_for(lambda: r.llen("seen:walker-done") == 1, timeout=60)
    assert walked(r) == first_run + list(range(checkpoint, ITEMS))
    wait_for(lambda: not r.exists(f"it-{jid}"))  # cleared after on_complete recorded "done"
    successor.send_signal(signal.SIGTERM)
    successor.communicate(timeout=30)


def test_a_failed_item_retries_from_after_the_last_item_done(wurk: Wurk, r: Any) -> None:
    class Flaky(jobs.Walker):
        checkpoint_interval = 3600.0

        def each_iteration(self, item: int, n: int, delay: float) -> None:
            if item == 3 and not r.exists("flaky-failed"):
                r.set("flaky-failed", 1)
                raise RuntimeError("item 3 failed once")
            super().each_iteration(item, n, delay)

    job = Flaky()
    job.jid = "flaky"
    with pytest.raises(RuntimeError):
        job.perform(6, 0)
    assert r.hget("it-flaky", "c") == b"3"
    again = Flaky()
    again.jid = "flaky"
    again.perform(6, 0)
    assert walked(r) == [0, 1, 2, 3, 4, 5] and not r.exists("it-flaky")


@pytest.mark.parametrize(
    "write",
    [
        lambda r: r.set("it-bad", "not a hash"),
        lambda r: r.hset("it-bad", "c", b"\xff{"),
        lambda r: r.hset("it-bad", mapping={"c": "1", "ex": "many"}),
    ],
)
def test_an_unreadable_state_fails_the_job_instead_of_starting_over(wurk: Wurk, r: Any, write: Any) -> None:
    write(r)
    with pytest.raises(UnreadableIterationState, match="it-bad"):
        IterationState(r, "bad").load()
    job = jobs.Walker()
    job.jid = "bad"
    with pytest.raises(UnreadableIterationState):
        job.perform(3, 0)
    assert not r.exists("seen:walker")


@pytest.mark.django_db
def test_queryset_enumerator_walks_by_primary_key_after_the_cursor() -> None:
    from django.contrib.auth.models import Group

    groups = [Group.objects.create(name=f"g{i}") for i in range(7)]
    pks = [g.pk for g in groups]
    assert [(g.pk, c) for g, c in queryset_enumerator(Group.objects.all(), None, batch_size=3)] == [
        (pk, pk) for pk in pks
    ]
    assert [g.pk for g, _ in queryset_enumerator(Group.objects.all(), pks[2], batch_size=2)] == pks[3:]
    Group.objects.filter(pk=pks[4]).delete()  # rows gone while waiting neither shift nor repeat the rest
    assert [g.pk for g, _ in queryset_enumerator(Group.objects.order_by("-name"), pks[2], 10)] == [
        pks[3],
        *pks[5:],
    ]
    with pytest.raises(ValueError, match="batch_size"):
        list(queryset_enumerator(Group.objects.all(), None, batch_size=0))


def test_with_basic_fetch_a_stopping_worker_pushes_the_job_back_too(
    wurk: Wurk, r: Any, test_config: Any
) -> None:
    from django_wurk.core.worker.launcher import Launcher

    wurk.configure(test_config.replace(fetch="basic", concurrency=1, timeout=20.0))
    worker = Launcher(wurk)
    worker.start()
    try:
        jid = jobs.Walker.perform_async(ITEMS, 0.05)
        wait_for(lambda: r.llen("seen:walker") >= 5, timeout=30)
    finally:
        worker.stop()
    # Basic fetch holds the job only in memory: it is pushed back at once, with its cursor saved.
    assert [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)] == [jid]
    assert int(r.hget(f"it-{jid}", "c")) == len(walked(r)) < ITEMS
    assert not r.exists("seen:walker-done")
