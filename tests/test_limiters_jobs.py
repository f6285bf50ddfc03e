"""Rate-limited jobs: OverLimit reschedules with back-off, dies past its cap, and limits hold
across real worker processes (and survive a holder killed with -9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from django_wurk import Job, Wurk, limiter
from django_wurk.core import wire
from django_wurk.core.features.batches import Batch, BatchStatus
from django_wurk.core.features.limiters import base
from django_wurk.core.features.limiters.middleware import default_backoff
from tests.conftest import wait_for
from tests.jobsapp import limiter_jobs
from tests.test_runwurk import ROOT, start, stop_later, worker_env  # noqa: F401 - a fixture

FULL = limiter.window("test-full", 1, 86_400, wait_timeout=0)


def payload_of(jid: str, **extra: Any) -> dict[str, Any]:
    return {"class": "tests.jobsapp.limiter_jobs.never_admitted", "args": [1], "jid": jid,
            "queue": "default", "retry": 5, "created_at": time.time(), **extra}  # fmt: skip


@pytest.fixture
def full(wurk: Wurk) -> limiter.Limiter:
    assert FULL.attempt().admitted  # the one call of the day: every job after it is refused
    return FULL


def scheduled(r: Any) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(m), s) for m, s in r.zrange("schedule", 0, -1, withscores=True)]


def test_over_limit_reschedules_with_backoff_without_failing(wurk: Wurk, r: Any, full: Any) -> None:
    before = time.time()
    wurk.execute(payload_of("a" * 24))  # returns: the job is done with, not failed
    [(entry, at)] = scheduled(r)
    assert entry["jid"] == "a" * 24 and entry["overrated"] == 1
    assert "error_message" not in entry and "retry_count" not in entry
    assert before + 300 + 1 <= at <= time.time() + 600  # 300 * 1 + rand(300) + 1
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
    assert r.lrange("never_admitted:ran", 0, -1) == []
    r.delete("schedule")
    wurk.execute(entry)
    [(again, at)] = scheduled(r)
    assert again["overrated"] == 2 and at >= before + 601


def test_default_backoff_is_sidekiq_enterprises(wurk: Wurk) -> None:
    delays = {default_backoff(None, {"overrated": 3}, RuntimeError()) for _ in range(400)}
    assert min(delays) >= 901 and max(delays) <= 1200 and len(delays) > 100
    assert 1 <= default_backoff(None, {"overrated": "junk"}, RuntimeError()) <= 300


def test_past_its_cap_a_job_dies_rate_limited(wurk: Wurk, r: Any, full: Any) -> None:
    deaths: list[Any] = []
    wurk.death_handlers.append(lambda payload, exc: deaths.append((payload["jid"], type(exc).__name__)))
    wurk.execute(payload_of("b" * 24, overrated=20))
    assert r.zcard("schedule") == 0
    [dead] = [json.loads(m) for m in r.zrange("dead", 0, -1)]
    assert dead["error_message"] == "rate_limited: test-full" and dead["overrated"] == 21
    assert dead["error_class"].endswith("OverLimit")
    assert deaths == [("b" * 24, "OverLimit")]


def test_a_limiters_own_reschedule_and_backoff(wurk: Wurk, r: Any) -> None:
    custom = limiter.concurrent("custom", 1, wait_timeout=0, reschedule=2, backoff=lambda lim, p, e: 7)
    assert custom.acquire("held").admitted

    class Limited(Job):
        def perform(self) -> None:
            with custom.within_limit():
                pass

    name = Limited.wire_name
    started = time.time()
    wurk.execute({"class": name, "args": [], "jid": "c" * 24, "queue": "q", "overrated": 1})
    [(entry, at)] = scheduled(r)
    assert entry["overrated"] == 2 and entry["queue"] == "q" and started + 7 <= at <= time.time() + 7
    wurk.execute(entry)
    assert json.loads(r.zrange("dead", 0, -1)[0])["error_message"] == "rate_limited: custom"

    custom.reschedule = 0
    with pytest.raises(limiter.OverLimit):  # reschedule=0: a failure like any other
        wurk.execute({"class": name, "args": [], "jid": "d" * 24, "queue": "q"})


def test_configured_errors_are_handled_as_over_limit(wurk: Wurk, r: Any) -> None:
    class TooManyRequests(Exception):
        pass

    class Calls(Job):
        def perform(self) -> None:
            raise TooManyRequests("429")

    name = Calls.wire_name
    saved = base.Defaults(**vars(base.defaults))
    try:
        limiter.configure(errors=[TooManyRequests], backoff=lambda lim, p, e: "nonsense", reschedule=3)
        wurk.execute({"class": name, "args": [], "jid": "e" * 24, "queue": "default", "overrated": 3})
        assert json.loads(r.zrange("dead", 0, -1)[0])["error_message"] == "rate_limited: TooManyRequests"
        wurk.execute({"class": name, "args": [], "jid": "f" * 24, "queue": "default"})
        [(entry, at)] = scheduled(r)  # a back-off that answers nonsense: the default one
        assert entry["overrated"] == 1 and at >= time.time() + 290
        with pytest.raises(limiter.LimiterError):
            limiter.configure(errors=[int])  # type: ignore[list-item]
    finally:
        base.defaults.__dict__.update(vars(saved))


def test_a_rescheduled_batch_job_is_neither_a_success_nor_a_failure_of_its_batch(
    wurk: Wurk, r: Any, full: Any
) -> None:
    batch = Batch()
    with batch.jobs():
        limiter_jobs.never_admitted.perform_async(1)
    [raw] = r.lrange("queue:default", 0, -1)
    wurk.execute(wire.loads(raw))
    status = BatchStatus(batch.bid)
    assert status.pending == 1 and status.failed_jids == [] and not status.complete
    [(entry, _)] = scheduled(r)
    assert entry["bid"] == batch.bid


# Across processes ------------------------------------------------------------------------


def test_ten_threads_in_two_processes_never_exceed_a_concurrent_limit_of_two(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    for n in range(40):
        limiter_jobs.gated.perform_async(n)
    for _ in range(2):
        stop_later.append(start(redis_url, "-c", "10", "-q", "limits"))
    wait_for(lambda: r.llen("gate:done") == 40, timeout=60)
    assert sorted(int(n) for n in r.lrange("gate:done", 0, -1)) == list(range(40))
    # Measured by the jobs: the most ever inside at once. 2, not more (and the limit was used).
    assert r.zscore("gate:max", "max") == 2
    assert r.get("gate:inside") == b"0"
    assert r.zcard("schedule") == 0 and r.zcard("retry") == 0 and r.zcard("dead") == 0
    stats = r.hgetall("lmtr-stats:test-gate")
    assert int(stats[b"held"]) == 40 and int(stats[b"waited"]) > 0


HOLDER = """
import sys, time
from django_wurk import wurk, limiter, Config
wurk.configure(Config(redis_url=sys.argv[1]))
slot = limiter.concurrent("killed", 1, lock_timeout=1.5)
with slot.within_limit():
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_slot_whose_holder_was_killed_is_reclaimed_after_lock_timeout_not_before(
    wurk: Wurk, r: Any, redis_url: str
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, redis_url],
        cwd=ROOT, env=worker_env(redis_url), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    [(_, expires)] = r.zrange("lmtr-cs:killed", 0, -1, withscores=True)

    def server_now() -> float:
        seconds, micros = r.time()
        return float(seconds + micros / 1e6)

    other = limiter.concurrent("killed", 1, lock_timeout=1.5, wait_timeout=0)
    with pytest.raises(limiter.OverLimit), other.within_limit():
        pass
    assert server_now() < expires  # refused while the dead holder's lock lasted
    patient = limiter.concurrent("killed", 1, lock_timeout=1.5, wait_timeout=5)
    with patient.within_limit():
        assert server_now() >= expires  # admitted only once it ran out
    assert r.hget("lmtr-stats:killed", "reclaimed") == b"1"
