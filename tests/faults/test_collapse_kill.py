"""A worker killed (SIGKILL) while it runs a debounced or a throttled job.

Once fired (debounce) or admitted (throttle), the job is a plain job in the worker's private
list: the kill loses nothing (the job is run again by another worker, under the same jid)
and doubles nothing (it is not collapsed again, so no second job appears, and the burst or
slot it came from still answers with its jid).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.jobsapp.collapse_jobs import debounced_slow, runs, throttled_slow


def private_lists(r: Any) -> list[bytes]:
    return list(r.scan_iter(match="queue:sq|*"))


def every_job(r: Any) -> list[dict[str, Any]]:
    """Every job Redis holds anywhere: queues, private lists, schedule, retry, dead."""
    found = []
    for key in [*r.scan_iter(match="queue:*")]:
        found += [json.loads(x) for x in r.lrange(key, 0, -1)]
    for key in ("schedule", "retry", "dead"):
        found += [json.loads(x) for x in r.zrange(key, 0, -1)]
    return found


@pytest.mark.parametrize("name", ["debounced", "throttled"])
def test_kill_minus_nine_of_a_worker_holding_a_collapsed_job(
    wurk: Wurk, r: Any, spawn_worker: Callable[..., Any], name: str
) -> None:
    slow = debounced_slow if name == "debounced" else throttled_slow
    jids = {slow.perform_async("x", 3) for _ in range(5)}
    assert len(jids) == 1
    (jid,) = jids
    victim = spawn_worker("-c", "2")
    started = f"{slow.__name__}:started"
    wait_for(lambda: runs(started), timeout=60)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # Held by the dead worker: still in Redis, under its jid, and nowhere else.
    held = [job["jid"] for k in private_lists(r) for job in map(json.loads, r.lrange(k, 0, -1))]
    assert held == [jid]
    assert [job["jid"] for job in every_job(r)] == [jid]
    # The same job pushed again meanwhile is answered with the held one's jid (throttle) or
    # starts a new burst (debounce: the first one fired); either way no second copy of it.
    rescuer = spawn_worker("-c", "2")
    wait_for(lambda: runs(f"{slow.__name__}:done") == ["x"], timeout=60)
    wait_for(lambda: all(r.llen(k) == 0 for k in private_lists(r)), timeout=30)
    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(30) == 0
    assert len(runs(started)) == 2  # killed once, then run to the end once
    assert runs(f"{slow.__name__}:done") == ["x"]
    assert every_job(r) == []
