"""Unique jobs (Sidekiq Enterprise's ``unique_for``) on a real Redis, with real workers.

What counts as the same job, the lock's TTL, who may push while it is held, when it is
released (success, start, automatic death) and when it is kept (a failure waiting for its
retry, a manual kill), and many pushers racing. The transaction paths are in
``test_unique_transaction.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from django_wurk import Batch, BatchStatus, Config, Job, Wurk, job
from django_wurk.api import DeadSet, RetrySet, ScheduledSet, unique_lock_owner
from django_wurk.core import wire
from django_wurk.core.features.unique import UniqueSettings, digest
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp.unique_jobs import (
    NightlyReport,
    dies_unique,
    flaky_unique,
    refresh_feed,
    runs,
    sync_address,
    unique_rails_job,
)

ROOT = Path(__file__).resolve().parent.parent
DEAD_REDIS = "redis://127.0.0.1:1/0"


def lock_key(payload: dict[str, Any]) -> str:
    return "unique:" + digest(payload)


def queued(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def scheduled(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.zrange("schedule", 0, -1)]


def make_due(r: Any, key: str) -> None:
    for member in r.zrange(key, 0, -1):
        r.zadd(key, {member: time.time() - 1}, xx=True)


def unique_locks(r: Any) -> list[str]:
    return sorted(k.decode() for k in r.scan_iter(match="unique:*"))


# Options ------------------------------------------------------------------------------


def test_the_options_are_checked_where_they_are_set() -> None:
    with pytest.raises(ValueError, match="unique_for must be seconds"):
        sync_address.set(unique_for="10m")
    with pytest.raises(ValueError, match="unique_for must be seconds"):
        sync_address.set(unique_for=0)
    with pytest.raises(ValueError, match="unique_for must be seconds"):
        sync_address.set(unique_for=True)
    with pytest.raises(ValueError, match="unique_until must be 'start' or 'success'"):
        sync_address.set(unique_until="finish")
    with pytest.raises(ValueError, match="unique_for"):

        class Broken(Job):
            options = {"unique_for": -5}

    assert sync_address.set(unique_for=timedelta(minutes=2)).payload([1])["unique_for"] == 120
    assert sync_address.set(unique_for=1.5).payload([1])["unique_for"] == 1.5
    assert NightlyReport.set().payload(["d"])["unique_for"] == 600  # a timedelta, in whole seconds


# What counts as the same job --------------------------------------------------------------


def test_a_duplicate_is_dropped_and_returns_none(wurk: Wurk, r: Any) -> None:
    jid = sync_address.perform_async(1)
    assert jid is not None
    assert sync_address.perform_async(1) is None
    assert sync_address.perform_in(60, 1) is None
    assert [p["jid"] for p in queued(r)] == [jid] and r.zcard("schedule") == 0
    payload = queued(r)[0]
    key = lock_key(payload)
    assert r.get(key) == jid.encode()
    assert 599 <= r.ttl(key) <= 600  # unique_for
    # What Sidekiq Enterprise writes into a payload that took its lock.
    assert payload["unique_for"] == 600
    assert payload["unique_token"] == key.removeprefix("unique:")
    assert float(payload["unlocks_at"]) == pytest.approx(time.time() + 600, abs=5)


def test_other_arguments_or_another_queue_are_other_jobs(wurk: Wurk, r: Any) -> None:
    a = sync_address.perform_async(1)
    b = sync_address.perform_async(2)
    c = sync_address.set(queue="slow").perform_async(1)
    d = NightlyReport.perform_async("2026-01-01")
    assert None not in (a, b, c, d)
    assert len(unique_locks(r)) == 4
    assert unique_lock_owner(sync_address, [1]) == a
    assert unique_lock_owner(sync_address, [1], queue="slow") == c
    assert unique_lock_owner("tests.jobsapp.unique_jobs.sync_address", [2]) == b
    assert unique_lock_owner(NightlyReport, ["2026-01-01"]) == d
    assert unique_lock_owner(sync_address, [3]) is None


def test_a_job_without_unique_for_or_with_it_false_is_never_checked(wurk: Wurk, r: Any) -> None:
    first = sync_address.perform_async(1)
    forced = sync_address.set(unique_for=False).perform_async(1)  # Sidekiq Enterprise's force push
    assert forced is not None and forced != first
    assert r.llen("queue:default") == 2
    assert r.get(lock_key(queued(r)[0])) == first.encode()  # the force push took nothing
    assert "unique_token" not in queued(r)[1]


def test_a_scheduled_job_holds_its_lock_for_the_delay_plus_unique_for(wurk: Wurk, r: Any) -> None:
    jid = sync_address.perform_in(3600, 7)
    assert jid is not None
    assert sync_address.perform_async(7) is None
    key = lock_key(scheduled(r)[0])
    assert 4195 <= r.ttl(key) <= 4200
    assert r.get(key) == jid.encode()


def test_a_job_scheduled_absurdly_far_ahead_still_gets_a_lock(wurk: Wurk, r: Any) -> None:
    jid = sync_address.perform_at(1e15, 8)  # year 31,000-odd
    assert jid is not None and sync_address.perform_at(1e15, 8) is None
    assert 0 < r.ttl(lock_key(scheduled(r)[0])) <= 10**10


def test_an_activejob_payload_is_unique_by_its_job_class_and_arguments(wurk: Wurk, r: Any) -> None:
    """Each ActiveJob push carries a fresh job_id and enqueued_at: they must not count."""
    jid = unique_rails_job.perform_async(1, "a")
    assert jid is not None
    assert unique_rails_job.perform_async(1, "a") is None
    assert unique_rails_job.perform_async(1, "b") is not None
    payload = queued(r)[0]
    data = payload["args"][0]
    identity = [payload["class"], "default", "UniqueRailsJob", data["arguments"]]
    expected = hashlib.sha256(json.dumps(identity, separators=(",", ":"), ensure_ascii=False).encode())
    assert payload["unique_token"] == base64.b64encode(expected.digest()).decode()
    assert unique_lock_owner(unique_rails_job, [1, "a"]) == jid


# The digest is Ruby's -----------------------------------------------------------------------


# What Ruby's `JSON.dump(["MyJob", "default", [1, "a/b", {"k" => nil}, 1.5, "é\u2028", "\u0001", -0, 10**20]])`
# prints: compact, raw UTF-8 (no \u escapes but for control characters), "/" and U+2028 left
# alone, a float with its ".5", Integers of any size as digits.
RUBY_JSON = '["MyJob","default",[1,"a/b",{"k":null},1.5,"é\u2028","\\u0001",0,100000000000000000000]]'


def test_the_digest_is_the_sha256_of_what_ruby_json_dump_writes() -> None:
    payload = {
        "class": "MyJob",
        "queue": "default",
        "args": [1, "a/b", {"k": None}, 1.5, "é\u2028", "\u0001", 0, 10**20],
    }
    assert wire.dumps(["MyJob", "default", payload["args"]]) == RUBY_JSON
    sha256 = hashlib.sha256(RUBY_JSON.encode("utf-8"))
    # Sidekiq Enterprise 8's layout by default: the base64 (with its padding) of the sha256.
    assert digest(payload) == base64.b64encode(sha256.digest()).decode()
    assert digest(payload, "sha256hex") == sha256.hexdigest()
    assert digest(payload, "enterprise7") == hashlib.sha1(RUBY_JSON.encode("utf-8")).hexdigest()
    # Pinned, so a change of encoder cannot move every lock key unnoticed.
    assert digest(payload) == "JEHqIqEiULMdsUOConwdizl+c7hDUbCOy4C6c3HMDYk="
    assert digest(payload, "sha256hex") == "2441ea22a12250b31db14382a27c1d8b397e73b84351b08ecb80ba7371cc0d89"
    # Floats in exponent form, as Ruby writes them (Python's own JSON says 1e+20).
    assert digest({"class": "J", "queue": "q", "args": [1e20, 2.5e-07, 1e-05]}, "sha256hex") == (
        hashlib.sha256(b'["J","q",[1.0e+20,2.5e-07,1.0e-05]]').hexdigest()
    )
    # A payload without a queue is the default queue's, as the push writes it.
    assert digest({"class": "MyJob", "args": payload["args"]}) == digest(payload)


# Who may push while the lock is held ----------------------------------------------------------


def test_the_owner_pushing_its_own_job_again_passes(wurk: Wurk, r: Any) -> None:
    """An on-commit push retried, or an outbox row relayed twice, pushes the same jid again."""
    payload = sync_address.set().payload([5])
    payload["jid"] = "a" * 24
    assert wurk.client.push(dict(payload)) == "a" * 24
    assert wurk.client.push(dict(payload)) == "a" * 24  # the lock holds this jid: it passes
    other = dict(payload, jid="b" * 24)
    assert wurk.client.push(other) is None


def test_retry_and_scheduled_promotions_pass_for_the_owner(wurk: Wurk, r: Any) -> None:
    jid = sync_address.perform_in(3600, 9)
    entry = next(iter(ScheduledSet()))
    assert entry.add_to_queue()  # "Add to queue": a promotion, like the poller's
    assert [p["jid"] for p in queued(r)] == [jid]
    # The same job waiting in the retry set, promoted by "Retry now".
    failed = dict(queued(r)[0], retry_count=0, error_class="RuntimeError", failed_at=time.time())
    r.delete("queue:default")
    r.zadd("retry", {wire.dumps(failed): time.time() + 60})
    assert next(iter(RetrySet())).retry()
    assert [p["jid"] for p in queued(r)] == [jid]
    assert unique_lock_owner(sync_address, [9]) == jid


def test_perform_bulk_decides_for_each_job(wurk: Wurk, r: Any) -> None:
    held = sync_address.perform_async(3)
    jids = sync_address.perform_bulk([[1], [2], [1], [3], [4]])
    assert jids[0] and jids[1] and jids[4]
    assert jids[2] is None  # the same as the first, in the same bulk
    assert jids[3] is None  # held before the bulk
    assert [p["jid"] for p in queued(r)] == [held, jids[0], jids[1], jids[4]]


def test_a_stray_key_of_another_type_is_not_a_lock(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    key = lock_key(sync_address.set().payload([1]))
    r.hset(key, "x", "1")
    with caplog.at_level(logging.WARNING, logger="django_wurk.unique"):
        assert sync_address.perform_async(1) is not None
        assert sync_address.perform_async(1) is not None  # never blocked by it
    assert "is not a unique lock" in caplog.text
    assert unique_lock_owner(sync_address, [1]) is None


# Release ---------------------------------------------------------------------------------


def test_a_successful_run_releases_the_lock(wurk: Wurk, r: Any, workers: Launcher) -> None:
    jid = sync_address.perform_async(11)
    wait_for(lambda: runs("sync_address"))
    assert runs("sync_address") == [[11, jid]]  # held while it ran
    wait_for(lambda: unique_lock_owner(sync_address, [11]) is None)
    again = sync_address.perform_async(11)
    assert again is not None and again != jid


def test_until_start_releases_before_perform(wurk: Wurk, r: Any, workers: Launcher) -> None:
    refresh_feed.perform_async(12)
    wait_for(lambda: runs("refresh_feed"))
    [[_user, owner, again]] = runs("refresh_feed")
    assert owner is None  # released before perform
    assert again is not None  # so a push made during perform passed
    assert unique_lock_owner(refresh_feed, [12]) == again


def test_a_failure_keeps_the_lock_until_the_retry_succeeds(wurk: Wurk, r: Any, workers: Launcher) -> None:
    jid = flaky_unique.perform_async(13)
    wait_for(lambda: r.zcard("retry") == 1)
    assert unique_lock_owner(flaky_unique, [13]) == jid  # kept while waiting for its retry
    assert flaky_unique.perform_async(13) is None
    wait_for(lambda: runs("flaky_unique") == [13], timeout=15)
    wait_for(lambda: unique_lock_owner(flaky_unique, [13]) is None)


def test_an_automatic_death_releases_the_lock(wurk: Wurk, r: Any, workers: Launcher) -> None:
    dies_unique.perform_async(14)
    wait_for(lambda: r.zcard("dead") == 1)
    wait_for(lambda: unique_lock_owner(dies_unique, [14]) is None)
    assert dies_unique.perform_async(14) is not None


@pytest.mark.parametrize("where", ["schedule", "retry", "dead_set_kill"])
def test_a_manual_kill_keeps_the_lock(wurk: Wurk, r: Any, where: str) -> None:
    jid = sync_address.perform_in(3600, 15)
    if where == "schedule":
        assert next(iter(ScheduledSet())).kill()
    elif where == "retry":
        member = r.zrange("schedule", 0, -1)[0]
        r.zrem("schedule", member)
        r.zadd("retry", {member: time.time() + 60})
        assert next(iter(RetrySet())).kill()
    else:
        payload = scheduled(r)[0]
        r.delete("schedule")
        DeadSet().kill(payload)
    assert r.zcard("dead") == 1
    assert unique_lock_owner(sync_address, [15]) == jid  # a kill by hand keeps it
    assert sync_address.perform_async(15) is None


def test_a_job_skipped_as_expired_releases_its_lock(wurk: Wurk, r: Any) -> None:
    """An expiring unique job no worker started in time is done with: its lock goes too."""
    sync_address.set(expires_in=60).perform_async(17)
    payload = wire.loads(r.rpop("queue:default"))
    payload["expires_at"] = time.time() - 1
    wurk.execute(payload)
    assert runs("sync_address") == []  # skipped, not run
    assert unique_lock_owner(sync_address, [17]) is None


def test_a_release_never_deletes_a_lock_another_job_took_since(wurk: Wurk, r: Any) -> None:
    """The lock expired while the job waited, and a newer copy took it: the old one's
    success must not release the newer copy's lock."""
    sync_address.perform_async(16)
    payload = wire.loads(r.rpop("queue:default"))
    key = lock_key(payload)
    r.set(key, "n" * 24, ex=600)  # expired and taken again, by another jid
    wurk.execute(payload)
    assert r.get(key) == b"n" * 24
    wurk.report_death(payload, RuntimeError("died"))
    assert r.get(key) == b"n" * 24


def test_inside_a_batch_block_the_lock_is_taken_when_the_block_writes(wurk: Wurk, r: Any) -> None:
    held = sync_address.perform_async(21)
    batch = Batch(description="unique")
    with batch.jobs():
        inside = sync_address.perform_async(21)
        fresh = sync_address.perform_async(22)
        assert inside is not None  # decided when the block writes, not here
        assert r.llen("queue:default") == 1
    assert [p["jid"] for p in queued(r)] == [held, fresh]
    assert BatchStatus(batch.bid).total == 1  # only the job that was written counts
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: BatchStatus(batch.bid).complete)
    finally:
        worker.stop()
    assert sorted(user for user, _ in runs("sync_address")) == [21, 22]


def test_a_push_buffered_during_an_outage_takes_its_lock_when_replayed(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, client_buffer=10, redis_socket_timeout=0.5))
    first = sync_address.perform_async(18)
    second = sync_address.perform_async(18)
    assert first is not None and second is not None  # buffered: nothing is decided yet
    wurk.configure(test_config.replace(client_buffer=10))
    wait_for(
        lambda: r.llen("queue:default") == 1 and unique_lock_owner(sync_address, [18]) == first, timeout=30
    )
    wait_for(lambda: _buffered(wurk) == 0, timeout=30)
    assert [p["jid"] for p in queued(r)] == [first]  # the duplicate was dropped at the replay


def _buffered(wurk: Wurk) -> int:
    return wurk.writer.buffered


# Many pushers ----------------------------------------------------------------------------------


def test_ten_threads_pushing_the_same_job_push_it_once(wurk: Wurk, r: Any) -> None:
    barrier = threading.Barrier(10)
    results: list[str | None] = []

    def push() -> None:
        barrier.wait()
        results.append(sync_address.perform_async(99))

    threads = [threading.Thread(target=push) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [jid for jid in results if jid is not None]
    assert len(results) == 10 and len(winners) == 1
    assert [p["jid"] for p in queued(r)] == winners


PUSHER = """
import json, sys, threading, time
from django_wurk import Config, wurk
from tests.jobsapp.unique_jobs import sync_address

wurk.configure(Config(redis_url=sys.argv[1]))
r = wurk.redis
r.rpush("pushers:ready", 1)
deadline = time.monotonic() + 20
while not r.exists("pushers:go"):
    if time.monotonic() > deadline:
        sys.exit("never told to go")
    time.sleep(0.001)
results = []
threads = [threading.Thread(target=lambda: results.append(sync_address.perform_async(42))) for _ in range(5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(results))
"""


def test_processes_racing_to_push_the_same_job_push_it_once(wurk: Wurk, r: Any, redis_url: str) -> None:
    """Three processes of five threads each: one jid among the fifteen, one job in Redis."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PUSHER, redis_url], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
        )
        for _ in range(3)
    ]
    try:
        wait_for(lambda: r.llen("pushers:ready") == 3, timeout=30)
        r.set("pushers:go", 1)
        outputs = [p.communicate(timeout=30)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    results = [jid for out in outputs for jid in json.loads(out)]
    winners = [jid for jid in results if jid is not None]
    assert len(results) == 15 and len(winners) == 1
    assert [p["jid"] for p in queued(r)] == winners
    assert unique_lock_owner(sync_address, [42]) == winners[0]


@job(unique_for=30)
def not_registered_for_workers(n: int) -> None: ...


def test_the_data_api_finds_the_lock_of_a_class_in_any_queue(wurk: Wurk, r: Any) -> None:
    jid = not_registered_for_workers.set(queue="q1").perform_async(1)
    assert unique_lock_owner(not_registered_for_workers, [1], queue="q1") == jid
    assert unique_lock_owner(not_registered_for_workers, [1]) is None  # another queue, another job
    assert 29 <= r.ttl(lock_key(queued(r, "q1")[0])) <= 30


# Data someone else wrote -------------------------------------------------------------------------


def test_a_payload_without_unique_token_releases_the_key_its_fields_name(wurk: Wurk, r: Any) -> None:
    """A producer that records no token (a Ruby process): the key is computed from the payload."""
    payload = {"class": sync_address.wire_name, "queue": "default", "args": [31], "jid": "r" * 24,
               "unique_for": 600, "retry": True}  # fmt: skip
    r.set(lock_key(payload), "r" * 24, ex=600)
    wurk.execute(payload)
    assert unique_lock_owner(sync_address, [31]) is None


@pytest.mark.parametrize("layout", ["enterprise7", "sha256hex"])
def test_unique_digest_names_the_key_in_the_older_layouts_and_any_layout_s_token_is_released(
    wurk: Wurk, r: Any, test_config: Config, layout: str
) -> None:
    wurk.configure(test_config.with_section(UniqueSettings(unique_digest=layout)))
    jid = sync_address.perform_async(41)
    assert jid is not None and sync_address.perform_async(41) is None
    [payload] = queued(r)
    assert r.get("unique:" + digest(payload, layout)) == jid.encode()
    assert payload["unique_token"] == digest(payload, layout)
    assert not r.exists(lock_key(payload))  # nothing under Enterprise 8's key
    # A process back on the default layout releases the lock the token names.
    wurk.configure(test_config)
    wurk.execute(payload)
    assert not r.exists("unique:" + digest(payload, layout))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("unique_until", 5),
        ("unique_until", ["start"]),
        ("unique_until", "finish"),
        ("unique_token", 5),
        ("unique_token", "../x\n*"),
        ("unique_for", "600"),
        ("unique_for", [600]),
    ],
)
def test_a_worker_runs_a_job_whose_unique_fields_make_no_sense(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture, field: str, value: Any
) -> None:
    jid = sync_address.perform_async(32)
    payload = wire.loads(r.rpop("queue:default"))
    payload[field] = value
    r.lpush("queue:default", wire.dumps(payload))
    worker = Launcher(wurk)
    with caplog.at_level(logging.WARNING, logger="django_wurk.unique"):
        worker.start()
        try:
            wait_for(lambda: runs("sync_address"))
            wait_for(lambda: r.llen("queue:default") == 0 and not worker.manager.work.snapshot())
        finally:
            worker.stop()
    assert runs("sync_address") == [[32, jid]]  # ran once, with its lock held
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
    if field == "unique_token":  # names no lock: nothing released, the lock expires on its own
        assert unique_lock_owner(sync_address, [32]) == jid
        assert "names no lock" in caplog.text
    else:  # unique_until read as "success", unique_for of any kind: released after it ran
        assert unique_lock_owner(sync_address, [32]) is None
    if field == "unique_until":
        assert "releasing its lock on success" in caplog.text


def test_a_lock_key_of_another_type_at_release_never_fails_the_job(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sync_address.perform_async(33)
    payload = wire.loads(r.rpop("queue:default"))
    key = lock_key(payload)
    r.delete(key)
    r.rpush(key, "not a lock")
    with caplog.at_level(logging.WARNING, logger="django_wurk.unique"):
        wurk.execute(payload)  # no exception: the job succeeded
        wurk.report_death(payload, RuntimeError("died"))
    assert runs("sync_address") == [[33, None]]
    # The release script reads a key of another type as nobody's lock: it is left alone.
    assert r.type(key) == b"list"
