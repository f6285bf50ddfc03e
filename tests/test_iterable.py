"""Iterable jobs: walk a cursor, save it, resume after a stop or a crash instead of starting over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core.control import watch_stop
from django_wurk.core.features.iterable import IterationState, UnreadableIterationState
from django_wurk.core.features.iterable.state import Saved
from django_wurk.iterable import (
    Interrupted,
    csv_batches_enumerator,
    csv_enumerator,
    list_enumerator,
    queryset_enumerator,
)
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.jobsapp.jobs import record
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


# Hooks, cancel, max_iteration_runtime and enumerators (Sidekiq 7.3-8.0's) ---------------------


def events(r: Any) -> list[Any]:
    return [json.loads(x) for x in r.lrange("seen:hooked", 0, -1)]


def items_done(r: Any) -> list[int]:
    return [e for e in events(r) if isinstance(e, int)]


def walked_through(items: range) -> list[Any]:
    """What ``Hooked`` records for these items: each between its ``in`` and ``out``."""
    return [e for i in items for e in (["in", i], i, ["out", i])]


@pytest.fixture
def stop_flag() -> Iterator[threading.Event]:
    """The flag ``stopping()`` reads on this thread, as a worker's processor thread has it."""
    flag = threading.Event()
    watch_stop(flag)
    try:
        yield flag
    finally:
        watch_stop(threading.Event())


def hooked(job_class: type[jobs.Hooked] = jobs.Hooked, jid: str = "hooked") -> jobs.Hooked:
    job = job_class()
    job.jid = jid
    return job


def test_hooks_run_in_sidekiqs_order_on_the_first_run_and_on_a_resume(
    wurk: Wurk, r: Any, stop_flag: threading.Event
) -> None:
    class StopsAt2(jobs.Hooked):
        def each_iteration(self, item: int, n: int, delay: float) -> None:
            super().each_iteration(item, n, delay)
            if item == 2:
                stop_flag.set()  # the worker is told to stop while item 2 runs

    with pytest.raises(Interrupted) as stopped:
        hooked(StopsAt2).perform(5, 0)
    assert stopped.value.behind is False  # a stop goes back to the head of the queue
    assert events(r) == ["start", *walked_through(range(3)), "stop"]
    state = r.hgetall("it-hooked")
    assert state[b"c"] == b"3" and state[b"ex"] == b"1" and float(state[b"rt"]) >= 0

    stop_flag.clear()
    r.delete("seen:hooked")
    hooked(StopsAt2).perform(5, 0)
    assert events(r) == [["resume", 0], *walked_through(range(3, 5)), "stop", "complete"]
    assert not r.exists("it-hooked")


def test_a_failed_item_ends_the_run_without_on_stop_and_the_retry_resumes(wurk: Wurk, r: Any) -> None:
    class FailsAt1Once(jobs.Hooked):
        def each_iteration(self, item: int, n: int, delay: float) -> None:
            if item == 1 and r.incr("failed-once") == 1:
                raise RuntimeError("item 1 failed")
            super().each_iteration(item, n, delay)

    with pytest.raises(RuntimeError):
        hooked(FailsAt1Once).perform(3, 0)
    # The around_iteration context saw the error (no "out" for item 1), no on_stop, cursor saved.
    assert events(r) == ["start", *walked_through(range(1)), ["in", 1]]
    assert r.hget("it-hooked", "c") == b"1" and r.hget("it-hooked", "ex") == b"1"
    r.delete("seen:hooked")
    hooked(FailsAt1Once).perform(3, 0)
    assert events(r) == [["resume", 0], *walked_through(range(1, 3)), "stop", "complete"]


def test_an_around_iteration_that_swallows_an_error_counts_the_item_done(wurk: Wurk, r: Any) -> None:
    class Forgiving(jobs.Hooked):
        @contextmanager
        def around_iteration(self, item: int, n: int, delay: float) -> Iterator[None]:
            try:
                yield
            except ValueError:
                record("hooked", ["forgiven", item])

        def each_iteration(self, item: int, n: int, delay: float) -> None:
            if item == 1:
                raise ValueError("bad row")
            super().each_iteration(item, n, delay)

    hooked(Forgiving).perform(3, 0)
    assert events(r) == ["start", 0, ["forgiven", 1], 2, "stop", "complete"]


def test_a_cancel_written_as_sidekiq_writes_it_stops_the_job_before_its_first_item(
    wurk: Wurk, r: Any
) -> None:
    # Sidekiq 7.3's cancel!: HSETNX it-<jid> cancelled <epoch seconds>, before the job ever ran.
    r.hsetnx("it-hooked", "cancelled", int(time.time()))
    hooked().perform(5, 0)  # returns: a cancelled job is done, not failed
    assert events(r) == ["start", "cancel", "stop", "complete"]
    assert not r.exists("it-hooked")


def test_a_cancel_from_elsewhere_is_seen_at_the_next_save_between_two_items(wurk: Wurk, r: Any) -> None:
    class SavesEachItem(jobs.Hooked):
        checkpoint_interval = 0.0

        def each_iteration(self, item: int, n: int, delay: float) -> None:
            super().each_iteration(item, n, delay)
            if item == 1:
                assert IterationState(r, "hooked").cancel() >= int(time.time()) - 1  # "another process"

    job = hooked(SavesEachItem)
    job.perform(5, 0)
    assert events(r) == ["start", *walked_through(range(2)), "cancel", "stop", "complete"]
    assert job.cancelled and job.cursor == 2 and not r.exists("it-hooked")


def test_a_cancel_from_elsewhere_waits_for_the_save_but_the_jobs_own_is_seen_at_once(
    wurk: Wurk, r: Any
) -> None:
    class CancelledAt1(jobs.Hooked):
        def each_iteration(self, item: int, n: int, delay: float) -> None:
            super().each_iteration(item, n, delay)
            if item == 1:
                IterationState(r, "other").cancel()  # another job's cancel: not this one's business
                self.cancel()

    hooked(CancelledAt1).perform(5, 0)  # checkpoint_interval is an hour: no save in between
    assert events(r) == ["start", *walked_through(range(2)), "cancel", "stop", "complete"]
    assert not r.exists("it-hooked") and r.hexists("it-other", "cancelled")
    assert 0 < r.ttl("it-other") <= 30 * 24 * 3600  # kept long enough for a job waiting to retry


def test_cancel_keeps_the_first_time_and_returns_it(wurk: Wurk, r: Any) -> None:
    state = IterationState(r, "twice")
    assert state.cancel(now=1_700_000_000) == 1_700_000_000
    assert state.cancel(now=1_800_000_000) == 1_700_000_000  # HSETNX: the first cancel stands
    assert r.hget("it-twice", "cancelled") == b"1700000000"  # Ruby's Time.now.to_i, as text
    assert state.cancelled() and not IterationState(r, "never").cancelled()
    # A job not started yet gets the first run's cursor beside the flag (Ruby 7.3/8.0 fail a job
    # whose hash has no "c"); one under way keeps its own.
    assert r.hget("it-twice", "c") == b"null"
    halfway = IterationState(r, "halfway")
    assert halfway.save(Saved(cursor=[7, "x"], executions=2, runtime=1.5)) is False
    halfway.cancel()
    assert halfway.load() == Saved(cursor=[7, "x"], executions=2, runtime=1.5) and halfway.cancelled()


def test_a_job_cancelled_while_a_worker_runs_it_stops_and_is_not_retried(
    wurk: Wurk, r: Any, workers: Any
) -> None:
    class SavesOften(jobs.Hooked):
        checkpoint_interval = 0.05

    jid = SavesOften.perform_async(400, 0.02)
    assert jid is not None
    wait_for(lambda: len(items_done(r)) >= 5, timeout=30)
    IterationState(r, jid).cancel()
    wait_for(lambda: "complete" in events(r), timeout=30)
    done = items_done(r)
    assert done == list(range(len(done))) and len(done) < 400
    assert events(r)[-3:] == ["cancel", "stop", "complete"]
    wait_for(lambda: not r.exists(f"it-{jid}"))
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0 and r.llen("queue:default") == 0


def test_past_max_iteration_runtime_a_run_saves_its_cursor_and_goes_behind_the_waiting_jobs(
    wurk: Wurk, r: Any
) -> None:
    class Hasty(jobs.Hooked):
        max_iteration_runtime = 0.001

    with pytest.raises(Interrupted) as left:
        hooked(Hasty).perform(5, 0.01)
    # One item at least (else a slow start would loop for ever), then out, behind the others.
    assert left.value.behind is True
    assert events(r) == ["start", *walked_through(range(1)), "stop"]
    assert r.hget("it-hooked", "c") == b"1"


class Overtime(jobs.Hooked):
    max_iteration_runtime = 0.3


@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_a_worker_runs_a_job_past_max_iteration_runtime_in_turns_with_the_jobs_waiting(
    wurk: Wurk, r: Any, test_config: Any, fetch: str
) -> None:
    from django_wurk.core.worker.launcher import Launcher

    wurk.configure(test_config.replace(fetch=fetch, concurrency=1))
    worker = Launcher(wurk)
    worker.start()
    try:
        jid = Overtime.perform_async(24, 0.05)
        wait_for(lambda: "start" in events(r), timeout=30)
        for n in range(3):
            jobs.echo.perform_async(n)
        wait_for(lambda: "complete" in events(r), timeout=60)
    finally:
        worker.stop()
    ev = events(r)
    assert items_done(r) == list(range(24))  # in turns, none twice, none skipped
    resumes = [e for e in ev if isinstance(e, list) and e[0] == "resume"]
    assert resumes and ev.count("stop") == len(resumes) + 1
    # The first run went behind the three echoes pushed while it ran: they ran before it resumed.
    assert resumes[0] == ["resume", 3]
    wait_for(lambda: not r.exists(f"it-{jid}"))
    assert r.zcard("retry") == 0 and r.llen("queue:default") == 0


def test_build_enumerator_returning_none_skips_the_job_and_a_wrong_value_says_so(wurk: Wurk, r: Any) -> None:
    class Nothing(jobs.Hooked):
        def build_enumerator(self, n: int, delay: float, *, cursor: Any) -> Any:
            return None if n == 0 else 5 if n == 1 else iter([1, 2])

    hooked(Nothing).perform(0, 0)
    assert events(r) == [] and not r.exists("it-hooked")
    with pytest.raises(TypeError, match=r"Nothing.build_enumerator\(\) must return an iterable"):
        hooked(Nothing).perform(1, 0)
    with pytest.raises(TypeError, match=r"must yield \(item, cursor\) pairs, got 1"):
        hooked(Nothing).perform(2, 0)


def test_an_iterable_job_class_is_checked_when_defined() -> None:
    with pytest.raises(TypeError, match="must not define perform"):

        class DefinesPerform(jobs.Hooked):
            def perform(self, *args: Any) -> None: ...

    with pytest.raises(ValueError, match=r"Bad\.checkpoint_interval must be a number of seconds, 0 or more"):

        class Bad(jobs.Hooked):
            checkpoint_interval = -1.0

    with pytest.raises(ValueError, match=r"Worse\.max_iteration_runtime must be .* above 0 or None, got 0"):

        class Worse(jobs.Hooked):
            max_iteration_runtime = 0


def test_list_enumerator_resumes_after_the_items_done() -> None:
    assert list(list_enumerator(["a", "b", "c"], None)) == [("a", 1), ("b", 2), ("c", 3)]
    assert list(list_enumerator(("a", "b", "c"), 2)) == [("c", 3)]
    assert list(list_enumerator(["a"], 5)) == []  # a shorter list than last time: done
    for cursor in ("2", -1, 1.0, True, [1], {"i": 1}):
        with pytest.raises(ValueError, match="list_enumerator: cursor must be the number of items done"):
            list_enumerator(["a"], cursor)
    with pytest.raises(TypeError, match="must be a list or another sequence, got str"):
        list_enumerator("abc", None)


CSV_TEXT = 'id,name\n1,ann\n2,"bob\nby"\n3,cy\n4,di\n5,ed\n'


def test_csv_enumerator_reads_rows_of_a_path_or_a_file_after_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text(CSV_TEXT, encoding="utf-8")
    rows = list(csv_enumerator(path, None))
    assert rows[0] == (["id", "name"], 1) and rows[2] == (["2", "bob\nby"], 3) and len(rows) == 6
    assert list(csv_enumerator(str(path), 4, header=True)) == [({"id": "5", "name": "ed"}, 5)]
    with path.open(newline="") as file:
        named = list(csv_enumerator(file, 1, header=True))
        assert not file.closed  # the caller's file stays the caller's
    assert [(row["id"], cursor) for row, cursor in named] == [("2", 2), ("3", 3), ("4", 4), ("5", 5)]
    semi = tmp_path / "semi.csv"
    semi.write_text("a;b\nc;d\n", encoding="utf-8")
    assert list(csv_enumerator(semi, None, delimiter=";")) == [(["a", "b"], 1), (["c", "d"], 2)]
    with pytest.raises(ValueError, match="csv_enumerator: cursor"):
        csv_enumerator(path, "x")


def test_csv_batches_enumerator_counts_rows_so_a_new_batch_size_resumes_right(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text(CSV_TEXT, encoding="utf-8")
    batches = list(csv_batches_enumerator(path, None, batch_size=2, header=True))
    assert [([r["id"] for r in batch], cursor) for batch, cursor in batches] == [
        (["1", "2"], 2),
        (["3", "4"], 4),
        (["5"], 5),
    ]
    # Saved at 2 rows with batches of 2, resumed with batches of 3: row 3 next, none twice.
    resumed = list(csv_batches_enumerator(path, 2, batch_size=3, header=True))
    assert [([r["id"] for r in batch], cursor) for batch, cursor in resumed] == [(["3", "4", "5"], 5)]
    with pytest.raises(ValueError, match="batch_size must be an int of at least 1"):
        csv_batches_enumerator(path, None, batch_size=0)


def test_a_csv_job_stopped_halfway_closes_its_enumerator_and_resumes_at_the_next_row(
    wurk: Wurk, r: Any, tmp_path: Path, stop_flag: threading.Event
) -> None:
    path = tmp_path / "people.csv"
    path.write_text(CSV_TEXT, encoding="utf-8")

    class Import(jobs.Hooked):
        def build_enumerator(self, n: int, delay: float, *, cursor: Any) -> Iterator[tuple[Any, int]]:
            rows = csv_enumerator(path, cursor, header=True)
            try:
                yield from rows
            finally:  # closed by the job as it leaves, not whenever the garbage is collected
                record("hooked", "closed")

        def each_iteration(self, row: dict[str, str], n: int, delay: float) -> None:
            record("hooked", row["name"])
            if row["id"] == str(n):
                stop_flag.set()

    with pytest.raises(Interrupted):
        hooked(Import).perform(2, 0)
    assert events(r)[-2:] == ["stop", "closed"]
    stop_flag.clear()
    hooked(Import).perform(0, 0)
    names = [e for e in events(r) if isinstance(e, str) and e not in ("start", "stop", "complete", "closed")]
    assert names == ["ann", "bob\nby", "cy", "di", "ed"] and r.exists("it-hooked") == 0
