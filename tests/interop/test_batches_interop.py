"""Batch jobs are ordinary Sidekiq jobs to Ruby: its API reads them (with their ``bid``), runs
them, and its "Retry" of a dead batch job is taken up by our worker, which counts it in its
batch though no django-wurk code saw the push."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Wurk
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import on_versions, ruby_seen
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder, runs
from tests.jobsapp.interop_jobs import RubyEcho

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()


@pytest.fixture
def launcher(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def test_rubys_api_reads_batch_jobs_and_a_ruby_worker_runs_them(
    wurk: Wurk, r: Any, rb: Callable[..., Any], ruby_worker: Callable[..., Any]
) -> None:
    batch = Batch()
    with batch.jobs():
        jid = RubyEcho.perform_async("in a batch")
    [job] = rb(op="queue", name="ruby")["jobs"]
    assert job["jid"] == jid and job["klass"] == "Interop::Echo" and job["args"] == ["in a batch"]
    assert json.loads(r.lindex("queue:ruby", 0))["bid"] == batch.bid
    ruby_worker("ruby", concurrency=1)
    wait_for(lambda: [s for s in ruby_seen(r) if s["jid"] == jid], timeout=30)
    # Sidekiq OSS does not count it in our batch: the batch is still waiting for it.
    assert BatchStatus(batch.bid).pending == 1


def test_a_dead_batch_job_retried_by_rubys_api_rejoins_its_batch(
    wurk: Wurk, r: Any, rb: Callable[..., Any], launcher: Launcher
) -> None:
    batch = Batch()
    batch.on("success", Recorder)
    batch.on("death", Recorder)
    with batch.jobs():
        jid = batch_jobs.fixed_later.perform_async(1)
        batch_jobs.work.perform_async(2)
    wait_for(lambda: [c for c in runs("callbacks") if c["event"] == "death"])
    assert BatchStatus(batch.bid).dead_jids == [jid]
    r.set("fixed", "1")
    assert rb(op="entry", set="dead", jid=jid, action="retry") is True  # pushed by Ruby, not by us
    wait_for(lambda: [c for c in runs("callbacks") if c["event"] == "success"], timeout=15)
    status = BatchStatus(batch.bid)
    assert status.succeeded and status.pending == 0 and status.dead_jids == [] and status.total == 2
    assert r.zscore("dead-batches", batch.bid) is None
