"""``timeout``: a job still running past its limit fails with ``TimedOut`` and follows its
retry rules, whether it runs Python code or is blocked in C (a ``sleep``, a socket ``recv``).

Thread mode runs on real in-process workers (the ``workers`` fixture); ``runwurk -P 2`` is
a real supervisor with forked children (tests/faults). The job lands in the retry set
within its timeout plus the watchdog's grace and a small margin, and the worker keeps
processing other jobs.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from django_wurk import Job, TimedOut, Wurk, job, wurk
from django_wurk.api import JobStatus
from django_wurk.core.features.timeouts.watchdog import GRACE
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for

#: What the watchdog may take beyond timeout + GRACE (its tick, Redis writes, a busy machine).
MARGIN = 1.5


@pytest.fixture
def silent_peer() -> Iterator[socket.socket]:
    """A server socket that takes connections (in the kernel's backlog) and never sends a
    byte. Closing it resets those connections: a thread left in ``recv()`` returns."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield server
    finally:
        server.close()


@job(timeout=0.5)
def busy_python(marker: str) -> None:
    wurk.redis.rpush("t:started", marker)
    while True:
        time.sleep(0.01)  # short steps: Python runs between them, so TimedOut lands


@job(timeout=0.5, track=True)
def long_sleep(marker: str) -> None:
    wurk.redis.rpush("t:started", marker)
    time.sleep(5)  # one C call: no exception reaches it (and longer than timeout + GRACE + MARGIN)
    wurk.redis.rpush("t:returned", marker)


@job(timeout=0.5, retry=0)
def blocked_recv(marker: str, port: int) -> None:
    wurk.redis.rpush("t:started", marker)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.recv(1)
    wurk.redis.rpush("t:returned", marker)


@job(timeout=0.5)
async def async_wait(marker: str) -> None:
    import asyncio

    wurk.redis.rpush("t:started", marker)
    await asyncio.sleep(30)


@job
def quick(marker: str) -> None:
    wurk.redis.rpush("t:quick", marker)


class Polite(Job):
    timeout = 5  # a class attribute, like ``queue``

    def perform(self, marker: str) -> None:
        wurk.redis.rpush("t:quick", marker)


def retries(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange("retry", 0, -1)]


def dead(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange("dead", 0, -1)]


def wait_started(r: Any, marker: str) -> float:
    wait_for(lambda: marker.encode() in r.lrange("t:started", 0, -1), timeout=10)
    return time.monotonic()


def test_the_option_is_checked_and_stored_in_the_payload(wurk: Wurk, r: Any) -> None:
    Polite.perform_async("a")
    busy_python.set(timeout=timedelta(seconds=90)).perform_async("b")
    stored = [json.loads(m) for m in r.lrange("queue:default", 0, -1)]
    assert sorted(p["timeout"] for p in stored) == [5, 90]
    for bad in (0, -1, "30", True, float("nan"), 10**10):
        with pytest.raises(ValueError, match="timeout"):
            busy_python.set(timeout=bad)


def test_a_python_job_past_its_timeout_fails_with_timed_out_and_is_retried(
    r: Any, workers: Launcher, caplog: pytest.LogCaptureFixture
) -> None:
    busy_python.perform_async("py")
    started = wait_started(r, "py")
    wait_for(lambda: retries(r), timeout=0.5 + MARGIN)
    assert time.monotonic() - started < 0.5 + MARGIN
    (entry,) = retries(r)
    assert entry["error_class"] == "TimedOut"
    assert entry["error_message"] == "the job ran longer than its timeout of 0.5 s"
    assert entry["retry_count"] == 0
    assert "did not stop" not in caplog.text  # stopped in Python, not given up on
    assert len(workers.manager.processors) == 10


def test_an_async_job_past_its_timeout_is_stopped_too(r: Any, workers: Launcher) -> None:
    async_wait.perform_async("aio")
    started = wait_started(r, "aio")
    wait_for(lambda: retries(r), timeout=0.5 + MARGIN)
    assert time.monotonic() - started < 0.5 + MARGIN
    assert retries(r)[0]["error_class"] == "TimedOut"


def test_a_job_blocked_in_sleep_is_given_up_on_and_its_slot_replaced(
    r: Any, workers: Launcher, caplog: pytest.LogCaptureFixture
) -> None:
    long_sleep.perform_async("zz")
    started = wait_started(r, "zz")
    wait_for(lambda: retries(r), timeout=0.5 + GRACE + MARGIN)
    assert time.monotonic() - started < 0.5 + GRACE + MARGIN
    (entry,) = retries(r)
    assert (entry["error_class"], entry["retry_count"]) == ("TimedOut", 0)
    assert "did not stop" in caplog.text
    status = JobStatus.get(entry["jid"])  # a tracked job's status says why
    assert status is not None and status.state == "retrying"
    assert status.error == "TimedOut: the job ran longer than its timeout of 0.5 s"
    # The slot is filled again (just after the failure is recorded) and the worker goes on;
    # the stuck thread is not counted.
    # (A replacement is listed just before its thread starts: wait for both.)
    wait_for(
        lambda: (
            len(workers.manager.processors) == 10
            and all(p.thread.is_alive() for p in workers.manager.processors)
        ),
        timeout=10,
    )
    for i in range(30):
        quick.perform_async(str(i))
    wait_for(lambda: r.llen("t:quick") == 30, timeout=10)
    # Not busy any more (the heartbeat's Busy page), and acknowledged: no recovery runs it again.
    busy = [json.loads(w.unit.raw)["jid"] for w in workers.manager.work.snapshot().values()]
    private = [json.loads(m)["jid"] for m in r.lrange(f"queue:sq|{workers.identity}|default", 0, -1)]
    assert entry["jid"] not in busy + private


def test_a_job_blocked_in_recv_follows_its_retry_rules_once_even_if_it_comes_back(
    r: Any, wurk: Wurk, test_config: Any, silent_peer: socket.socket
) -> None:
    wurk.configure(test_config.replace(concurrency=2))
    before = set(threading.enumerate())
    worker = Launcher(wurk)
    worker.start()
    try:
        blocked_recv.perform_async("net", silent_peer.getsockname()[1])
        started = wait_started(r, "net")
        wait_for(lambda: dead(r), timeout=0.5 + GRACE + MARGIN)  # retry=0: straight to the dead set
        assert time.monotonic() - started < 0.5 + GRACE + MARGIN
        (entry,) = dead(r)
        assert entry["error_class"] == "TimedOut"

        def processor_threads() -> list[threading.Thread]:
            return [t for t in set(threading.enumerate()) - before if t.name.startswith("wurk-processor")]

        # The replacement starts only after the failure is recorded and acknowledged: poll for it.
        wait_for(lambda: len(processor_threads()) == 3, timeout=10)  # two working, one left in recv()
        ours = processor_threads()
        assert len(ours) == 3
        assert len(worker.manager.processors) == 2
        quick.perform_async("after")
        wait_for(lambda: r.llen("t:quick") == 1, timeout=10)
    finally:
        worker.stop()
    (left,) = [t for t in ours if t not in {p.thread for p in worker.manager.processors}]
    silent_peer.close()
    wait_for(lambda: not left.is_alive(), timeout=10)
    # It came back (an error from recv): it recorded nothing more, and did not run on.
    assert len(dead(r)) == 1 and not retries(r)
    # (An earlier test's thread left in sleep() may push its own marker here; only ours counts.)
    assert b"net" not in r.lrange("t:returned", 0, -1)


def test_a_job_that_finishes_in_time_is_not_touched(r: Any, workers: Launcher) -> None:
    Polite.perform_async("ok")
    wait_for(lambda: r.llen("t:quick") == 1, timeout=10)
    assert not retries(r) and not dead(r)


def test_timed_out_is_public() -> None:
    assert issubclass(TimedOut, Exception)


def jids(units: Any) -> list[str]:
    return [json.loads(u.raw)["jid"] for u in units]


def test_an_abandoned_job_leaves_the_fetch_and_a_stray_sweep_never_pushes_it_back(
    r: Any, workers: Launcher
) -> None:
    """The fetch holds a running job (``held``) on behalf of the thread that took it; the
    watchdog gives it up from another thread, so the fetch must let go of it there, and the
    thread put in the stuck one's place fetches with a share of its own."""
    manager = workers.manager
    long_sleep.perform_async("held")
    wait_started(r, "held")
    stuck = next(w.thread for w in manager.work.snapshot().values())
    wait_for(lambda: retries(r), timeout=0.5 + GRACE + MARGIN)
    # The failure is recorded before the job is acknowledged and the fetch lets go of it
    # (``Manager.abandon``: never lost), so seeing the retry says nothing of the fetch yet.
    # The stuck thread's processor leaves the manager only once the fetch has settled for it.
    wait_for(lambda: all(p.thread is not stuck for p in manager.processors), timeout=10)
    (entry,) = retries(r)
    assert entry["jid"] not in jids(manager.fetch.held())
    assert all(share.thread is not stuck for share in manager.fetch._threads)
    assert manager.reclaim_strays()
    assert r.llen("queue:default") == 0  # nothing pushed back: it is not run again
    for i in range(20):
        quick.perform_async(str(i))
    wait_for(lambda: r.llen("t:quick") == 20, timeout=10)
    live = {p.thread for p in manager.processors}
    assert stuck not in live and {share.thread for share in manager.fetch._threads} <= live
    assert r.lrange("t:started", 0, -1) == [b"held"]


def test_a_thread_that_comes_back_after_its_job_was_abandoned_leaves_the_fetch_alone(
    r: Any, wurk: Wurk, test_config: Any, silent_peer: socket.socket
) -> None:
    wurk.configure(test_config.replace(concurrency=2))
    worker = Launcher(wurk)
    worker.start()
    fetch = worker.manager.fetch
    try:
        blocked_recv.perform_async("back", silent_peer.getsockname()[1])
        wait_started(r, "back")
        stuck = next(w.thread for w in worker.manager.work.snapshot().values())
        wait_for(lambda: dead(r), timeout=0.5 + GRACE + MARGIN)
        quick.perform_async("before")
        wait_for(lambda: r.llen("t:quick") == 1, timeout=10)
        shares = list(fetch._threads)
        silent_peer.close()
        wait_for(lambda: not stuck.is_alive(), timeout=10)
        assert fetch._threads == shares  # it neither released a share nor took one
        quick.perform_async("after")
        wait_for(lambda: r.llen("t:quick") == 2, timeout=10)
    finally:
        worker.stop()
    assert len(dead(r)) == 1 and not retries(r) and r.llen("t:returned") == 0


def test_a_job_blocked_in_a_second_capsule_is_given_up_on_by_that_capsule(
    r: Any, wurk: Wurk, test_config: Any
) -> None:
    from django_wurk.core.config import CapsuleSpec, QueueSpec

    capsules = (
        CapsuleSpec("default", (QueueSpec("default"),), 2),
        CapsuleSpec("single", (QueueSpec("serial"),), 1),
    )
    wurk.configure(test_config.replace(capsules=capsules))
    worker = Launcher(wurk)
    worker.start()
    try:
        single = worker.managers[1]
        long_sleep.set(queue="serial").perform_async("capsule")
        wait_started(r, "capsule")
        (stuck,) = [p.thread for p in single.processors]
        wait_for(lambda: retries(r), timeout=0.5 + GRACE + MARGIN)
        assert retries(r)[0]["error_class"] == "TimedOut"
        # The replacement starts just after the failure is recorded: poll for it.
        wait_for(lambda: len(single.processors) == 1 and single.processors[0].thread is not stuck, timeout=10)
        assert len(worker.manager.processors) == 2
        assert not single.fetch.held() and not r.llen(f"queue:sq|{worker.identity}|serial")
        quick.set(queue="serial").perform_async("next")  # the capsule's one slot works again
        wait_for(lambda: r.llen("t:quick") == 1, timeout=10)
    finally:
        worker.stop()


# soft_timeout ---------------------------------------------------------------------------------

from django_wurk.core.features.timeouts import SoftTimedOut  # noqa: E402


@job(soft_timeout=0.3, timeout=5, retry=0)
def soft_then_done(marker: str) -> None:
    try:
        while True:
            time.sleep(0.01)
    except SoftTimedOut as exc:
        wurk.redis.rpush("t:soft", f"{marker} {type(exc).__name__} {exc}")


@job(soft_timeout=0.3, retry=0)
def soft_uncaught(marker: str) -> None:
    while True:
        time.sleep(0.01)


def test_a_soft_timeout_is_raised_once_inside_and_the_job_may_finish(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    soft_then_done.perform_async("s")
    wait_for(lambda: r.llen("t:soft") == 1)
    assert r.lrange("t:soft", 0, -1) == [b"s SoftTimedOut the job ran longer than its soft timeout of 0.3 s"]
    wait_for(lambda: int(r.get("stat:processed") or 0) == 1)
    assert r.zcard("dead") == 0 and r.zcard("retry") == 0


def test_an_uncaught_soft_timeout_fails_the_job(wurk: Wurk, r: Any, workers: Launcher) -> None:
    soft_uncaught.perform_async("u")
    wait_for(lambda: r.zcard("dead") == 1, timeout=10)
    assert json.loads(r.zrange("dead", 0, -1)[0])["error_class"] == "SoftTimedOut"


def test_soft_timeout_is_checked_and_carried(wurk: Wurk, r: Any) -> None:
    with pytest.raises(ValueError, match="soft_timeout must be seconds"):
        soft_uncaught.set(soft_timeout=-1)
    soft_uncaught.set(soft_timeout=timedelta(seconds=2)).perform_async("c")
    assert json.loads(r.lindex("queue:default", 0))["soft_timeout"] == 2
