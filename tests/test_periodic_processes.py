"""Periodic jobs across real ``runwurk`` processes: one leader, each minute fired once.

The soak test runs three processes for about four minutes with a ``* * * * *`` loop and
kills the leader with -9 after the first fire; the faster test kills the leader of busy
processes and times the takeover with a short ``LEADER_TTL``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import LoopSet, current_leader
from tests.conftest import tail, wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import identity_of, start

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

EVERY_MINUTE = json.dumps(
    [{"cron": "* * * * *", "job": "tests.jobsapp.jobs.PeriodicTick", "args": ["minute"]}]
)


def fleet(
    redis_url: str, count: int, stop_later: list[subprocess.Popen[str]], **env: str
) -> list[subprocess.Popen[str]]:
    procs = [start(redis_url, "-c", "3", "-q", "periodic", "-q", "default", **env) for _ in range(count)]
    stop_later.extend(procs)
    return procs


def leader_proc(r: Any, procs: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    def find() -> subprocess.Popen[str] | None:
        leader = current_leader()
        if leader is None:
            return None
        pid = int(leader.split(":")[1])
        return next((p for p in procs if p.pid == pid), None)

    found: subprocess.Popen[str] = wait_for(find, timeout=30)
    return found


def runs(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange("seen:periodic", 0, -1)]


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        if proc.returncode is None:
            _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr[-3000:]


@pytest.fixture
def stop_later() -> Any:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
def test_a_leader_killed_under_load_is_replaced_within_its_ttl(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    ttl = 2.0
    procs = fleet(redis_url, 3, stop_later, WURK_PERIODIC=EVERY_MINUTE, WURK_LEADER_TTL=str(ttl))
    for proc in procs:
        identity_of(r, proc.pid)
    jobs.sleepy.set(queue="default").perform_bulk([(0.3,)] * 200)  # every worker thread busy
    wait_for(lambda: r.llen("seen:sleepy-start") >= 9, timeout=30)
    leader = leader_proc(r, procs)
    old = current_leader()
    wait_for(lambda: len(list(LoopSet(wurk))) == 1, timeout=10)  # the leader registered the loop
    leader.send_signal(signal.SIGKILL)
    leader.wait(10)
    killed = time.monotonic()
    new = wait_for(lambda: (current_leader() or old) != old and current_leader(), timeout=30)
    took = time.monotonic() - killed
    # The lease expires within the ttl of the kill; followers wake when its PTTL says it ends,
    # on their thread's next pass (every ttl/4): a takeover within ttl + ttl/4, plus slack.
    assert took <= ttl * 1.25 + 1.0, took
    assert int(new.split(":")[1]) in {p.pid for p in procs if p is not leader}
    assert r.llen("seen:sleepy-start") < 200  # still under load when it happened
    survivors = [p for p in procs if p is not leader]
    stop_all(survivors)
    assert current_leader() is None  # the last leader gave the lead back at its stop


@pytest.mark.slow
def test_each_child_of_a_swarm_campaigns(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    ttl = 2.0
    [swarm] = fleet(
        redis_url, 1, stop_later, WURK_PERIODIC=EVERY_MINUTE, WURK_LEADER_TTL=str(ttl), WURK_PROCESSES="2"
    )
    children = wait_for(lambda: len(r.smembers("processes")) == 2 and r.smembers("processes"), timeout=30)
    identities = {m.decode() for m in children}
    leader = wait_for(current_leader, timeout=10)
    assert leader in identities  # a child leads, not the supervisor
    os.kill(int(leader.split(":")[1]), signal.SIGKILL)
    new = wait_for(lambda: current_leader() not in (None, leader) and current_leader(), timeout=ttl * 2 + 5)
    # The other child, or the one the supervisor started in the killed one's place.
    assert int(new.split(":")[1]) != swarm.pid and r.sismember("processes", new)
    stop_all([swarm])
    assert current_leader() is None


def test_a_bad_entry_stops_runwurk_at_start_up_naming_it(redis_url: str) -> None:
    bad = json.dumps([{"cron": "* * * * *", "job": "no.such.Job"}])
    proc = start(redis_url, WURK_PERIODIC=bad)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "WURK['PERIODIC']: entry 0 (job 'no.such.Job'): no registered job" in stderr


@pytest.mark.soak
def test_three_processes_fire_each_minute_exactly_once_through_a_kill_of_the_leader(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    """About four minutes: three processes, then two after the leader is killed with -9.

    What can be asserted: every occurrence between the first fire and the last is fired
    exactly once (one history entry per minute, consecutive minutes, no minute twice), each
    fire's job ran exactly once, and a survivor leads within the ttl (30 s) of the kill plus
    a second, which, the kill coming right after a fire, is well before the next occurrence.
    """
    procs = fleet(redis_url, 3, stop_later, WURK_PERIODIC=EVERY_MINUTE)
    for proc in procs:
        identity_of(r, proc.pid)
    old = current_leader()
    leader = leader_proc(r, procs)

    def fires() -> list[Any]:
        loops = list(LoopSet(wurk))
        return loops[0].history() if loops else []

    wait_for(lambda: len(fires()) >= 1, timeout=75)
    leader.send_signal(signal.SIGKILL)
    leader.wait(10)
    killed = time.monotonic()
    wait_for(lambda: current_leader() not in (None, old), timeout=40)
    assert time.monotonic() - killed <= 30 + 1 + 2  # the ttl, one pass of the thread, slack
    wait_for(lambda: len(fires()) >= 4, timeout=200)
    history = fires()
    survivors = [p for p in procs if p is not leader]
    wait_for(lambda: len(runs(r)) >= len(history), timeout=30)
    stop_all(survivors)

    minutes = sorted(int(f.fired_at.timestamp() // 60) for f in history)
    assert max(Counter(minutes).values()) == 1, minutes  # no minute fired twice
    assert minutes == list(range(minutes[0], minutes[0] + len(minutes))), minutes  # and none missed
    assert all(f.fired_at.second < 10 for f in history), history  # each within seconds of its time
    ran = Counter(run["jid"] for run in runs(r))
    assert set(ran) == {f.jid for f in history} and set(ran.values()) == {1}
