"""Processes: Sidekiq's ``ProcessSet``, ``Workers`` and ``Stats`` report our worker, and its signals reach it.

Our heartbeat writes Sidekiq's process keys; Ruby's API (6.4.1) reads them exactly as it
reads a Ruby process, and ``Process#quiet!``/``#stop!``/``#dump_threads`` issued from Ruby
act on our worker.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.api import ProcessSet, Stats, Workers
from django_wurk.core.config import QueueSpec
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import Peer, on_versions
from tests.jobsapp import jobs

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()

BLOCKS = "tests.jobsapp.jobs.blocks_until_released"


def by_identity(processes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["identity"]: p for p in processes}


def test_ruby_reports_our_process_its_work_and_stats_and_signals_reach_it(
    rb: Callable[..., Any],
    r: Any,
    wurk: Wurk,
    test_config: Config,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # legacy_workers_key: Sidekiq <= 6.4.1 reads busy work from <identity>:workers only.
    wurk.configure(
        test_config.replace(
            concurrency=4,
            queues=(QueueSpec("critical"), QueueSpec("default")),
            tag="pyside",
            labels=("interop", "python"),
            legacy_workers_key=True,
        )
    )
    worker = Launcher(wurk)
    identity = worker.identity
    runner = threading.Thread(target=worker.run, kwargs={"handle_os_signals": False})
    runner.start()
    try:
        wait_for(lambda: r.sismember("processes", identity))
        jobs.echo.perform_async(1)
        jobs.echo.set(queue="critical").perform_async(2)
        jobs.always_fails.perform_async(3)  # retry set
        jobs.dies_at_once.perform_async(4)  # dead set
        jobs.echo.perform_in(3600, "later")  # schedule
        jobs.echo.set(queue="parked").perform_async("nobody listens")  # enqueued
        pushed_at = int(time.time())
        jid = jobs.blocks_until_released.perform_async({"busy": [1, None, "ü"]})
        # Stats are flushed by the heartbeat (every 0.2 s here), not per job.
        wait_for(lambda: r.get("stat:processed") == b"4" and r.get("stat:failed") == b"2")
        wait_for(lambda: r.hget(identity, "busy") == b"1" and r.hlen(f"{identity}:workers") == 1)

        [mine] = rb(op="processes")
        assert mine["identity"] == identity and mine["hostname"] == "testhost" and mine["pid"] == os.getpid()
        assert mine["tag"] == "pyside" and mine["labels"] == ["interop", "python"]
        assert mine["concurrency"] == 4 and mine["queues"] == ["critical", "default"]
        assert mine["busy"] == 1 and mine["quiet"] == "false" and mine["stopping"] is False
        assert mine["started_at"] == worker.heartbeat.started_at
        assert mine["beat"] == pytest.approx(time.time(), abs=5)
        [ours] = ProcessSet(wurk)
        assert (
            ours.identity,
            ours.hostname,
            ours.pid,
            ours.tag,
            ours.concurrency,
            ours.queues,
            ours.busy,
        ) == (
            mine["identity"],
            mine["hostname"],
            mine["pid"],
            mine["tag"],
            mine["concurrency"],
            mine["queues"],
            mine["busy"],
        )

        [work] = rb(op="workers")
        assert work["process_id"] == identity and work["queue"] == "default"
        assert work["class"] == BLOCKS and work["jid"] == jid and work["args"] == [{"busy": [1, None, "ü"]}]
        assert isinstance(work["run_at"], int) and pushed_at - 1 <= work["run_at"] <= time.time()
        [running] = Workers(wurk)
        assert (running.identity, running.tid, running.queue, running.run_at, running.record.jid) == (
            work["process_id"],
            work["thread_id"],
            work["queue"],
            work["run_at"],
            work["jid"],
        )

        stats = rb(op="stats")
        expected = {
            "processed": 4,
            "failed": 2,
            "workers_size": 1,
            "enqueued": 1,
            "scheduled_size": 1,
            "retry_size": 1,
            "dead_size": 1,
            "processes_size": 1,
        }
        assert {k: stats[k] for k in expected} == expected
        assert stats["queues"] == {"parked": 1, "critical": 0, "default": 0}
        ours_stats = Stats(wurk)
        assert {k: getattr(ours_stats, k) for k in expected} == expected
        assert ours_stats.queues == stats["queues"]

        # Process#dump_threads: our worker logs every thread's stack, the busy job's included.
        with caplog.at_level(logging.WARNING, logger="django_wurk.launcher"):
            assert rb(op="signal", identity=identity, signal="dump_threads") is True
            wait_for(lambda: any(rec.getMessage().startswith("thread dump done") for rec in caplog.records))
        dumps = [rec.getMessage() for rec in caplog.records if rec.name == "django_wurk.launcher"]
        assert any(d.startswith("thread wurk-processor-") and "in blocks_until_released" in d for d in dumps)

        # Process#quiet!: we stop fetching, finish the running job, and Ruby sees us as stopping.
        assert rb(op="signal", identity=identity, signal="quiet") is True
        wait_for(lambda: r.hget(identity, "quiet") == b"true")
        assert worker.manager.quieting.is_set()
        [mine] = rb(op="processes")
        assert mine["stopping"] is True and mine["busy"] == 1
        assert [p.stopping for p in ProcessSet(wurk)] == [True]
        jobs.release.set()
        wait_for(lambda: r.hget(identity, "busy") == b"0")

        # Process#stop!: run() returns, the process leaves the set, the last stats are flushed.
        assert rb(op="signal", identity=identity, signal="stop") is True
        runner.join(10)
        assert not runner.is_alive() and worker.stopped.is_set()
        assert not r.sismember("processes", identity)
        assert not r.exists(f"{identity}:work") and not r.exists(f"{identity}:workers")
        assert rb(op="processes") == []
        assert r.get("stat:processed") == b"5" and r.get("stat:failed") == b"2"
    finally:
        jobs.release.set()
        worker.signal("TERM")
        runner.join(10)
        jobs.release.clear()


def test_a_ruby_process_and_ours_side_by_side(
    peer: Peer, rb: Callable[..., Any], r: Any, wurk: Wurk, ruby_worker: Callable[..., Any]
) -> None:
    ruby = ruby_worker("ruby")
    worker = Launcher(wurk)  # default config: busy work under <identity>:work only
    worker.start()
    try:
        jid = jobs.blocks_until_released.perform_async("side")
        wait_for(lambda: r.hget(worker.identity, "busy") == b"1")

        theirs = by_identity(rb(op="processes"))
        ours = {p.identity: p for p in ProcessSet(wurk)}
        assert set(theirs) == set(ours) == {ruby.identity, worker.identity}
        assert theirs[ruby.identity]["pid"] == ruby.proc.pid and theirs[worker.identity]["pid"] == os.getpid()
        assert theirs[ruby.identity]["queues"] == ["ruby"] and theirs[worker.identity]["queues"] == [
            "default"
        ]
        for identity, p in ours.items():
            t = theirs[identity]
            assert (p.hostname, p.pid, p.tag, p.queues, p.busy, p.stopping) == (
                t["hostname"],
                t["pid"],
                t["tag"],
                t["queues"],
                t["busy"],
                t["stopping"],
            )
            # Sidekiq 6.4.1 writes concurrency only inside info; we read it there too.
            assert p.concurrency == t["concurrency"] == 3
        assert ProcessSet(wurk).total_concurrency() == 6
        assert (theirs[ruby.identity]["busy"], theirs[worker.identity]["busy"]) == (0, 1)

        # Known difference: by default we write busy work under <identity>:work (Sidekiq >= 6.4.2),
        # which Sidekiq 6.4.1's Workers does not read (7.x and 8.0 do); ours reads both names.
        listed = [(w["process_id"], w["jid"]) for w in rb(op="workers")]
        assert listed == ([] if peer.major < 7 else [(worker.identity, jid)])
        [running] = Workers(wurk)
        assert running.identity == worker.identity and running.record.jid == jid
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()
