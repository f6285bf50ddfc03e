"""A batch's jobs() block inside a database transaction: written at the commit, with its jobs.

They need real commits, hence ``transaction=True``; testing modes are here too, since they
are the other pushers a batch meets.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from django_wurk import Batch, BatchStatus, Config, Wurk, testing
from django_wurk.core.features.batches import batch as batch_module
from tests.conftest import wait_for
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_the_batch_and_its_jobs_are_written_at_the_commit(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with transaction.atomic():
        with batch.jobs():
            batch_jobs.work.perform_async(1)
            batch_jobs.work.perform_in(60, 2)
        batch.on("complete", Recorder)  # before the commit: written with the batch
        assert r.dbsize() == 0
    status = BatchStatus(batch.bid)
    assert status.exists and status.total == 2
    assert r.llen("queue:default") == 1 and r.zcard("schedule") == 1
    assert [c.target for c in status.callbacks] == ["tests.jobsapp.batch_jobs.Recorder"]


def test_a_rollback_writes_neither_the_batch_nor_its_jobs(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with pytest.raises(RuntimeError), transaction.atomic():
        with batch.jobs():
            batch_jobs.work.perform_async(1)
        raise RuntimeError("roll back")
    assert r.dbsize() == 0


def test_two_blocks_in_one_transaction_are_written_in_order(wurk: Wurk, r: Any) -> None:
    batch = Batch()
    with transaction.atomic():
        with batch.jobs():
            batch_jobs.work.perform_async(1)
        with batch.jobs():
            batch_jobs.work.perform_async(2)
    assert BatchStatus(batch.bid).total == 2


def test_immediate_mode_writes_at_the_end_of_the_block(wurk: Wurk, r: Any, use_app_settings: Any) -> None:
    use_app_settings(enqueue="immediate")
    batch = Batch()
    with pytest.raises(RuntimeError), transaction.atomic():
        with batch.jobs():
            batch_jobs.work.perform_async(1)
        assert BatchStatus(batch.bid).total == 1
        raise RuntimeError("the batch is already written")
    assert wurk.redis.llen("queue:default") == 1


def test_outbox_mode_refuses_a_batch_inside_a_transaction(wurk: Wurk, r: Any, use_app_settings: Any) -> None:
    use_app_settings(enqueue="outbox")
    with pytest.raises(ImproperlyConfigured, match="outbox"), transaction.atomic(), Batch().jobs():
        batch_jobs.work.perform_async(1)
    assert wurk.redis.dbsize() == 0
    batch = Batch()
    with batch.jobs():  # outside a transaction there is nothing to wait for
        batch_jobs.work.perform_async(1)
    assert BatchStatus(batch.bid).total == 1


def test_a_write_that_fails_after_the_commit_is_retried_exactly_once(
    wurk: Wurk, r: Any, test_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_write = batch_module._Flush.write

    def flaky_write(self: Any) -> None:
        calls.append(self.token)
        real_write(self)  # it reached Redis...
        if len(calls) == 1:
            raise ConnectionError("...but the reply was lost")

    monkeypatch.setattr(batch_module._Flush, "write", flaky_write)
    batch = Batch()
    with transaction.atomic(), batch.jobs():
        batch_jobs.work.perform_async(1)
    wait_for(lambda: len(calls) == 2)
    wait_for(lambda: not batch_module.retrier.busy())
    assert calls[0] and calls[0] == calls[1]  # the same token: the second write did nothing
    assert BatchStatus(batch.bid).total == 1 and r.llen("queue:default") == 1


def test_a_write_refused_after_the_commit_is_reported_with_its_jobs(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    reported: list[dict[str, Any]] = []
    wurk.error_handlers.append(lambda exc, context: reported.append(context))
    log = caplog.at_level(logging.ERROR, logger="django_wurk.batches")
    with log, transaction.atomic(), Batch(bid="neverwritten").jobs():
        batch_jobs.work.perform_async(1)
    assert "gave up writing batch neverwritten after the commit" in caplog.text
    assert reported and reported[0]["bids"] == ["neverwritten"] and len(reported[0]["jobs"]) == 1
    assert r.llen("queue:default") == 0


def test_fake_mode_records_batch_jobs_with_their_bid(wurk: Wurk) -> None:
    with testing.fake() as queues:
        batch = Batch()
        batch.on("complete", Recorder)
        with batch.jobs():
            batch_jobs.work.perform_async(1)
            batch_jobs.work.perform_in(60, 2)
        recorded = queues.jobs_for(batch_jobs.work)
        assert [p["bid"] for p in recorded] == [batch.bid, batch.bid]
        assert queues.drain() == 2  # runs them, with no batch state to update
    assert list(wurk.redis.scan_iter(match="b-*")) == [] and wurk.redis.zcard("batches") == 0


def test_inline_mode_runs_batch_jobs_at_once(wurk: Wurk) -> None:
    with testing.inline():
        batch = Batch()
        with batch.jobs():
            batch_jobs.work.perform_async(7)
    assert [json.loads(x) for x in wurk.redis.lrange("seen:work", 0, -1)] == [[7, batch.bid]]
    assert not wurk.redis.exists(f"b-{batch.bid}")


EXIT_SCRIPT = r"""
import django, logging, sys
django.setup()
from django.db import transaction
from django_wurk import Batch, wurk
from tests.jobsapp import batch_jobs

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from django_wurk import conf
wurk.configure(wurk.config.replace(redis_url="redis://127.0.0.1:1/0", redis_socket_timeout=0.2))
conf.use_app_settings(conf.Settings(push_retries=50))
batch = Batch(description="never written")
with transaction.atomic(), batch.jobs():
    batch_jobs.work.perform_async(1)
print(batch.bid, flush=True)
"""


def test_a_batch_write_still_waiting_at_exit_is_reported_with_its_jobs(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
    # SQLite in memory: the script only needs a transaction, and the suite's PostgreSQL
    # database (pytest-django's test_ copy) is not the one DATABASE_URL names.
    env.pop("DATABASE_URL", None)
    env.update(DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(root))
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    bid = proc.stdout.strip()
    assert proc.returncode == 0, proc.stderr
    assert "retrying in the background" in proc.stderr
    assert f"gave up writing batch {bid} after the commit" in proc.stderr
    assert "'args': [1]" in proc.stderr  # the job, so it can be pushed by hand
