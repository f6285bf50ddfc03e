"""``timeout`` under ``runwurk -P 2``: a child whose job is blocked in C past its timeout is
replaced; the job fails once with ``TimedOut`` (retry set, by its retry rules), and the
child's other running job is recovered by reliable fetch and runs to its end once."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from django_wurk import Wurk
from django_wurk.core.features.timeouts.watchdog import GRACE
from tests.conftest import wait_for
from tests.faults.test_swarm import children
from tests.jobsapp import jobs

MARGIN = 2.0


def check_the_replacement(r: Any, supervisor: Any, port: int) -> None:
    first = wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and c, timeout=30)

    jobs.hang_in_recv.perform_async("h", port)  # fetched first
    wait_for(lambda: r.llen("timeouts:started") == 1, timeout=30)
    started = time.monotonic()
    # Three slow jobs for the three free threads: the blocked child's other thread most
    # likely takes one (a thread may also take two at once, so that is not certain).
    for i in range(3):
        jobs.slow_mark.perform_async(f"s{i}", 3.0)
    wait_for(lambda: r.zcard("retry") == 1, timeout=1 + GRACE + MARGIN)
    assert time.monotonic() - started < 1 + GRACE + MARGIN

    (raw,) = r.zrange("retry", 0, -1)
    entry = json.loads(raw)
    assert (entry["error_class"], entry["retry_count"]) == ("TimedOut", 0)
    assert "recovered" not in entry  # failed by its timeout, not counted as a crash

    # The child is replaced; every slow job finishes exactly once, one of them after a
    # recovery (it was running in the replaced child, which never let it finish).
    wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and set(c) != set(first), timeout=30)
    wait_for(lambda: r.llen("timeouts:slow-done") == 3, timeout=30)
    # Nothing left anywhere that could still run: no job queued, none in a private list.
    wait_for(lambda: not r.llen("queue:default") and not r.keys("queue:sq|*"), timeout=30)
    done = sorted(m.decode() for m in r.lrange("timeouts:slow-done", 0, -1))
    assert done == ["s0", "s1", "s2"]
    # A slow job started in the replaced child never finished there and ran again after
    # its recovery; every other one started once.
    blocked = int(r.get("timeouts:hang-pid"))
    assert blocked in first and blocked not in children(r, supervisor.pid)
    starts = [m.decode().split("@") for m in r.lrange("timeouts:slow-started", 0, -1)]
    in_blocked = {marker for marker, pid in starts if int(pid) == blocked}
    assert len(in_blocked) <= 1  # its one free thread
    for marker in done:
        assert sum(1 for m, _ in starts if m == marker) == 1 + (marker in in_blocked), starts
    assert r.lrange("timeouts:started", 0, -1) == [b"h"]  # the timed-out job did not run again
    assert r.llen("timeouts:returned") == 0
    assert r.zcard("dead") == 0


def test_a_child_blocked_past_a_timeout_is_replaced_and_its_other_job_recovered(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any], tmp_path: Any
) -> None:
    with socket.socket() as silent:  # accepts connections, never sends
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        # A process counts as dead only a minute after its last beat: the other job can be
        # recovered at once only because the child deregisters before it exits.
        supervisor = spawn_worker("-P", "2", "-c", "2", WURK_PROCESS_DEAD_AFTER="60")
        try:
            check_the_replacement(r, supervisor, silent.getsockname()[1])
        finally:
            # TERM, not the fixture's KILL: killing the supervisor would leave its children
            # running on, taking jobs from the next tests.
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(60)
    assert supervisor.returncode == 0
    log = (tmp_path / "worker-0.log").read_text()
    assert "asked to be replaced" in log
    assert "died" not in log  # not taken for a crash


def test_every_job_blocked_past_its_timeout_in_a_replaced_child_fails_once_and_runs_once(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    """Two jobs blocked past their timeouts in one child: before, the first failed with
    ``TimedOut`` and the process was replaced at once, so the second was recovered and run
    again from the start (a ``retry=0`` job twice). Four such jobs on ``-P 2 -c 2`` put two
    in a child (both children's threads take one each)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        supervisor = spawn_worker("-P", "2", "-c", "2", WURK_PROCESS_DEAD_AFTER="60")
        try:
            first = wait_for(lambda: (c := children(r, supervisor.pid)) and len(c) == 2 and c, timeout=30)
            markers = [f"h{i}" for i in range(4)]
            for marker in markers:
                jobs.hang_in_recv.perform_async(marker, silent.getsockname()[1])
            # Each fails once, by its timeout (a retry comes 15 s later at the earliest).
            wait_for(lambda: r.zcard("retry") == 4, timeout=60)
            wait_for(lambda: not r.llen("queue:default") and not r.keys("queue:sq|*"), timeout=30)
            assert set(first) - set(children(r, supervisor.pid))  # a child was replaced
            entries = [json.loads(raw) for raw in r.zrange("retry", 0, -1)]
            assert sorted(e["args"][0] for e in entries) == markers
            assert {(e["error_class"], e["retry_count"]) for e in entries} == {("TimedOut", 0)}
            assert sorted(m.decode() for m in r.lrange("timeouts:started", 0, -1)) == markers
            assert r.llen("timeouts:returned") == 0
        finally:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(60)
    assert supervisor.returncode == 0
