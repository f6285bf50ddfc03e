"""kill -9 of a worker holding a cancelled job: the job recovered from its private list never runs."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from django_wurk import Wurk, cancel
from django_wurk.core import keys
from tests.conftest import wait_for
from tests.jobsapp import jobs


def private_lists(r: Any) -> list[bytes]:
    return list(r.scan_iter(match=f"{keys.PRIVATE_QUEUE_PREFIX}*"))


def test_a_cancelled_job_in_a_killed_workers_list_does_not_run_on_recovery(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any]
) -> None:
    # A long grace: the victim does not stop the job itself before it is killed.
    victim = spawn_worker("-c", "2", WURK_CANCEL_GRACE="120")
    jid = jobs.slow_mark.perform_async("victim", 60)
    wait_for(lambda: r.llen("timeouts:slow-started") == 1, timeout=30)
    assert cancel(jid) is True  # found in the victim's private list
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    assert sum(r.llen(k) for k in private_lists(r)) == 1  # still there: the flag is all it has
    rescuer = spawn_worker("-c", "2")
    try:
        wait_for(lambda: int(r.get(keys.STAT_CANCELLED) or 0) == 1, timeout=60)
        wait_for(lambda: not private_lists(r) and r.llen("queue:default") == 0, timeout=30)
    finally:
        rescuer.send_signal(signal.SIGTERM)
        assert rescuer.wait(30) == 0
    assert r.llen("timeouts:slow-started") == 1  # the recovered job never started again
    assert r.llen("timeouts:slow-done") == 0
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0
