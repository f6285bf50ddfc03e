"""``cancel(jid)``: a job cancelled wherever it is never runs, or stops; never retried, never buried.

Each place a job can be (a queue, the schedule and retry sets, a worker's private list, a
running thread) on a real worker and a real Redis; a running job that looks at
``current_job().cancelled`` and one that does not (stopped after the grace, in Python or
blocked in C); cancel racing the fetch; a worker killed with a cancelled job in its list.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Wurk, cancel, current_job, job, wurk
from django_wurk.api import JobStatus
from django_wurk.core import keys, wire
from django_wurk.core.features.cancel import CancelError, CancelSettings
from django_wurk.core.features.timeouts.watchdog import GRACE
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for

#: What stopping may take beyond the grace (the watcher's look, the watchdog's tick, a busy machine).
MARGIN = 3.0


@job(track=True)
def recorded(marker: str) -> None:
    wurk.redis.rpush("c:ran", marker)


@job(retry=3, track=True)
def failing(marker: str) -> None:
    """Is cancelled while it runs (by itself, for a deterministic order), then raises."""
    wurk.redis.rpush("c:started", marker)
    assert cancel(current_job().jid) is True  # found in this worker's private list
    raise RuntimeError(f"fails {marker}")


@job(track=True)
def polite(marker: str) -> None:
    """Looks at the flag between steps, and stops when told."""
    wurk.redis.rpush("c:started", marker)
    for _ in range(3000):
        if current_job().cancelled:
            wurk.redis.rpush("c:saw", marker)
            return
        time.sleep(0.01)
    wurk.redis.rpush("c:finished", marker)


@job(track=True, retry=3)
def stubborn(marker: str) -> None:
    """Never looks: runs Python in short steps, so ``Cancelled`` lands after the grace."""
    wurk.redis.rpush("c:started", marker)
    try:
        while True:
            time.sleep(0.01)
    finally:
        wurk.redis.rpush("c:interrupted", marker)


@job(track=True, retry=3)
def blocked(marker: str) -> None:
    """One long C call: nothing reaches it, so it is given up on."""
    wurk.redis.rpush("c:started", marker)
    time.sleep(8)
    wurk.redis.rpush("c:returned", marker)


@pytest.fixture
def graced(wurk: Wurk, test_config: Any) -> Iterator[Launcher]:
    """A worker whose cancelled jobs have half a second to stop."""
    wurk.configure(test_config.replace(concurrency=4).with_section(CancelSettings(cancel_grace=0.5)))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def ran(r: Any, key: str = "c:ran") -> list[str]:
    return [m.decode() for m in r.lrange(key, 0, -1)]


def traces(r: Any) -> tuple[int, int, int]:
    """Entries in the retry and dead sets, and ``stat:failed``: all zero for a cancelled job."""
    return r.zcard(keys.RETRY), r.zcard(keys.DEAD), int(r.get(keys.STAT_FAILED) or 0)


def cancelled_count(r: Any) -> int:
    return int(r.get(keys.STAT_CANCELLED) or 0)


def private_lists(r: Any) -> list[bytes]:
    return list(r.scan_iter(match=f"{keys.PRIVATE_QUEUE_PREFIX}*"))


def test_the_flag_is_sidekiqs_iterable_field(wurk: Wurk, r: Any) -> None:
    before = int(time.time())
    assert cancel("not-pushed-yet") is False  # found nowhere, flagged all the same
    value = r.hget("it-not-pushed-yet", "cancelled")
    assert value is not None and before <= int(value) <= time.time() + 1
    assert 0 < r.ttl("it-not-pushed-yet") <= 30 * 24 * 3600
    # HSETNX: the first cancel's time stands, as Ruby's cancel! keeps it.
    r.hset("it-not-pushed-yet", "cancelled", "12345")
    cancel("not-pushed-yet")
    assert r.hget("it-not-pushed-yet", "cancelled") == b"12345"


def test_a_queued_job_is_removed_recorded_and_never_runs(wurk: Wurk, r: Any) -> None:
    jid = recorded.perform_async("q")
    assert cancel(jid) is True
    assert r.llen("queue:default") == 0
    status = JobStatus.get(jid)
    assert status is not None and status.state == "cancelled" and status.finished
    assert cancelled_count(r) == 1 and traces(r) == (0, 0, 0)
    assert ran(r) == []
    assert cancel(jid) is False  # a second cancel finds nothing


@pytest.mark.parametrize("where", ["schedule", "retry"])
def test_a_scheduled_or_retrying_job_is_removed(wurk: Wurk, r: Any, where: str) -> None:
    if where == "schedule":
        jid = recorded.perform_in(3600, "s")
    else:
        jid = wire.new_jid()
        entry = {"class": recorded.wire_name, "args": ["s"], "queue": "default", "jid": jid, "retry": True,
                 "retry_count": 0, "error_class": "RuntimeError", "error_message": "x", "failed_at": time.time()}  # fmt: skip
        r.zadd(keys.RETRY, {wire.dumps(entry): time.time() + 3600})
    assert r.zcard(where) == 1
    assert cancel(jid) is True
    assert r.zcard(where) == 0 and r.llen("queue:default") == 0
    assert cancelled_count(r) == 1


def test_a_job_flagged_in_a_private_list_or_before_its_start_does_not_run(wurk: Wurk, r: Any) -> None:
    """The flag is all a fetched job meets: the cancel middleware ends it at its start."""
    jid = recorded.perform_async("p")
    raw = r.rpop("queue:default")
    private = keys.private_queue("testhost:1:deadbeef", "default")
    r.lpush(private, raw)  # fetched by a process (no process hash: a dead one)
    assert cancel(jid) is True  # found in the private list
    r.delete(private)
    r.lpush("queue:default", raw)  # and on its way to a worker again
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: r.llen("queue:default") == 0 and not any(r.llen(k) for k in private_lists(r)))
        wait_for(lambda: cancelled_count(r) == 1)
    finally:
        worker.stop()
    assert ran(r) == [] and traces(r) == (0, 0, 0)
    status = JobStatus.get(jid)
    assert status is not None and status.state == "cancelled"


def test_a_running_job_that_looks_sees_the_cancel_and_ends_cancelled(
    wurk: Wurk, r: Any, graced: Launcher
) -> None:
    jid = polite.perform_async("c")
    wait_for(lambda: ran(r, "c:started"))
    assert cancel(jid) is True
    wait_for(lambda: ran(r, "c:saw"), timeout=5)
    wait_for(lambda: cancelled_count(r) == 1)
    assert ran(r, "c:finished") == []
    assert traces(r) == (0, 0, 0)
    wait_for(lambda: (s := JobStatus.get(jid)) is not None and s.state == "cancelled")
    wait_for(lambda: not any(r.llen(k) for k in private_lists(r)))  # acknowledged


def test_a_running_job_that_does_not_look_is_stopped_after_the_grace(
    wurk: Wurk, r: Any, graced: Launcher
) -> None:
    jid = stubborn.perform_async("s")
    wait_for(lambda: ran(r, "c:started"))
    asked = time.monotonic()
    assert cancel(jid) is True
    wait_for(lambda: ran(r, "c:interrupted"), timeout=0.5 + MARGIN)
    assert time.monotonic() - asked >= 0.5  # it had its grace
    wait_for(lambda: cancelled_count(r) == 1)
    assert traces(r) == (0, 0, 0)  # a cancelled job is neither retried nor buried
    wait_for(lambda: (s := JobStatus.get(jid)) is not None and s.state == "cancelled")
    # The worker goes on with other jobs.
    recorded.perform_async("after")
    wait_for(lambda: ran(r) == ["after"])


def test_a_cancelled_job_blocked_in_c_is_given_up_on_and_recorded_cancelled(
    wurk: Wurk, r: Any, graced: Launcher, caplog: pytest.LogCaptureFixture
) -> None:
    jid = blocked.perform_async("b")
    wait_for(lambda: ran(r, "c:started"))
    assert cancel(jid) is True
    wait_for(
        lambda: (s := JobStatus.get(jid)) is not None and s.state == "cancelled", timeout=0.5 + GRACE + MARGIN
    )
    assert "did not stop" in caplog.text
    assert traces(r) == (0, 0, 0) and cancelled_count(r) >= 1
    wait_for(lambda: not any(r.llen(k) for k in private_lists(r)))  # acknowledged for it
    recorded.perform_async("after")  # its slot was replaced
    wait_for(lambda: ran(r) == ["after"])


def test_a_cancelled_job_that_fails_is_not_retried(wurk: Wurk, r: Any, graced: Launcher) -> None:
    """An error raised after the cancel (most likely the cancel's own) ends it cancelled."""
    jid = failing.perform_async("f")
    wait_for(lambda: cancelled_count(r) == 1)
    assert ran(r, "c:started") == ["f"]
    assert traces(r) == (0, 0, 0)
    wait_for(lambda: (s := JobStatus.get(jid)) is not None and s.state == "cancelled")


def test_cancel_racing_the_fetch_never_both_runs_and_cancels_silently(
    wurk: Wurk, r: Any, graced: Launcher
) -> None:
    """Pushed and cancelled at once, many times: each job either ran (and cancel said what it
    found) or never ran (and cancel found it); none is ever retried or buried."""
    outcomes: list[tuple[str, bool]] = []
    for n in range(25):
        marker = f"race{n}"
        jid = recorded.perform_async(marker)
        found: list[bool] = []
        thread = threading.Thread(target=lambda j=jid, out=found: out.append(cancel(j)))
        thread.start()
        thread.join(30)
        wait_for(lambda j=jid: (s := JobStatus.get(j)) is not None and s.finished, timeout=15)
        outcomes.append((JobStatus.get(jid).state, found[0]))  # type: ignore[union-attr]
    ran_markers = set(ran(r))
    for n, (state, found_it) in enumerate(outcomes):
        if f"race{n}" in ran_markers:
            assert state == "succeeded"  # it ran to its end: cancel came too late, or found it running
        else:
            assert state == "cancelled" and found_it  # it never ran: cancel found it
    assert traces(r) == (0, 0, 0)
    assert cancelled_count(r) == sum(1 for state, _ in outcomes if state == "cancelled")


def test_a_worker_killed_with_a_cancelled_job_in_its_list_never_runs_it_on_recovery(
    wurk: Wurk, r: Any
) -> None:
    """kill -9 leaves the job in the dead process's private list; the sweep that recovers it
    puts it back on its queue, and the worker that fetches it meets the flag."""
    jid = recorded.perform_async("k")
    raw = r.rpop("queue:default")
    dead = "deadhost:9:000000000009"  # its process hash expired: killed, no heartbeat
    r.lpush(keys.private_queue(dead, "default"), raw)
    assert cancel(jid) is True
    worker = Launcher(wurk)  # sweeps dead processes' lists at its start
    worker.start()
    try:
        wait_for(lambda: cancelled_count(r) == 1)
        wait_for(lambda: r.llen(keys.private_queue(dead, "default")) == 0 and r.llen("queue:default") == 0)
    finally:
        worker.stop()
    assert ran(r) == [] and traces(r) == (0, 0, 0)


def test_a_flag_key_of_another_type_is_a_clear_error_and_nothing_is_removed(wurk: Wurk, r: Any) -> None:
    jid = recorded.perform_async("w")
    r.set(keys.iteration_state(jid), "not a hash")
    with pytest.raises(CancelError, match="is not a hash"):
        cancel(jid)
    assert r.llen("queue:default") == 1  # nothing lost


def test_a_bad_jid_is_refused_with_its_name(wurk: Wurk) -> None:
    for bad in ("", None, 42, "x" * 5000):
        with pytest.raises(ValueError, match="cancel: jid"):
            cancel(bad)  # type: ignore[arg-type]


def test_current_job_outside_a_job_is_never_cancelled() -> None:
    assert current_job().cancelled is False and current_job().jid == ""


def test_a_removed_job_is_counted_in_its_batch(wurk: Wurk, r: Any) -> None:
    from django_wurk import Batch

    batch = Batch()
    with batch.jobs():
        jid = recorded.perform_async("in-batch")
    assert cancel(jid) is True
    status = batch.status
    assert status.pending == 0 and status.failures == 0
    assert json.loads(r.get(keys.STAT_CANCELLED) or b"0") == 1


@pytest.mark.tail
def test_hostile_jids_and_payloads_through_cancel(wurk: Wurk, r: Any) -> None:
    """Every corpus member sits in the queue; cancel is asked for each one's jid (or its bytes
    read as text): it answers or refuses the jid by name, and removes exactly what it says."""
    from tests.hostile.corpus import members

    corpus = members("cancel", time.time(), flavours=(True,), huge_mb=())
    r.sadd(keys.QUEUES, "default")
    for member in corpus:
        r.lpush("queue:default", member.raw)
    candidates: list[str] = ["\ud800", "a\x00b", "*?[]\\", "it-x", "é" * 300]
    for member in corpus:
        try:
            doc = json.loads(member.raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            doc = None
        jid = doc.get("jid") if isinstance(doc, dict) else None
        candidates.append(
            jid if isinstance(jid, str) else member.raw.decode("utf-8", "surrogateescape")[:200]
        )
    before = r.llen("queue:default")
    found = 0
    for jid in candidates:
        try:
            found += cancel(jid)
        except ValueError as exc:
            assert "cancel: jid" in str(exc)
    assert before - r.llen("queue:default") == found
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0


def test_cancel_grace_is_checked_and_read_from_settings() -> None:
    from django_wurk import Config
    from django_wurk.core.config import ConfigError
    from django_wurk.core.features import SETTINGS

    for bad in (-1, float("nan"), "soon", True):
        with pytest.raises(ConfigError, match="CANCEL_GRACE"):
            CancelSettings(cancel_grace=bad)  # type: ignore[arg-type]
    config = Config.from_mapping({"CANCEL_GRACE": "2.5"}, SETTINGS)
    assert config.section(CancelSettings).cancel_grace == 2.5


@job(timeout=0.5, retry=3, track=True)
def timed_and_blocked(marker: str) -> None:
    wurk.redis.rpush("c:started", marker)
    time.sleep(8)  # in C: neither TimedOut nor Cancelled lands


def test_a_job_cancelled_after_its_timeout_fired_is_recorded_cancelled_not_retried(
    wurk: Wurk, r: Any, graced: Launcher, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_wurk.core.features.timeouts import watchdog

    monkeypatch.setattr(watchdog, "GRACE", 4.0)  # room for the cancel between TimedOut and the give-up
    jid = timed_and_blocked.perform_async("t")
    wait_for(lambda: ran(r, "c:started"))
    wait_for(lambda: "its timeout of 0.5 s" in caplog.text)  # TimedOut raised, not landed
    assert cancel(jid) is True
    wait_for(lambda: (s := JobStatus.get(jid)) is not None and s.state == "cancelled", timeout=4.0 + MARGIN)
    assert traces(r) == (0, 0, 0)
