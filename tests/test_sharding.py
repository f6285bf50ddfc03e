"""Shards: several Redis servers, each job pushed to its class's or its push's shard.

Two real servers: the test server is the ``"default"`` shard and a second private one is
``"bulk"`` (the ``sharded`` fixture). Every assertion looks at both, so a job that landed
on the wrong shard, or on both, fails.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from django_wurk import Batch, Config, Job, Wurk
from django_wurk.conf import build_config
from django_wurk.core.client import ShardMismatch
from django_wurk.core.config import ConfigError, UnknownShard
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import identity_of, start, stop_later  # noqa: F401 - a fixture


class ToDefault(Job):
    wire_name = "tests.sharding.ToDefault"

    def perform(self, *args: Any) -> None:
        pass


class ToBulk(Job):
    wire_name = "tests.sharding.ToBulk"
    shard = "bulk"

    def perform(self, *args: Any) -> None:
        pass


class ToNowhere(Job):
    wire_name = "tests.sharding.ToNowhere"
    shard = "nowhere"

    def perform(self, *args: Any) -> None:
        pass


class UniqueOnBulk(Job):
    wire_name = "tests.sharding.UniqueOnBulk"
    shard = "bulk"
    unique_for = 600

    def perform(self, *args: Any) -> None:
        pass


def queued(client: Any, queue: str = "default") -> list[Any]:
    return [json.loads(e)["args"] for e in reversed(client.lrange(f"queue:{queue}", 0, -1))]


def test_a_push_lands_on_the_shard_its_class_or_its_set_call_names(wurk: Wurk, r: Any, sharded: Any) -> None:
    ToDefault.perform_async(1)
    ToBulk.perform_async(2)
    ToDefault.set(shard="bulk").perform_async(3)
    ToBulk.set(shard="default").perform_async(4)
    ToDefault.set(shard="bulk").perform_bulk([[5], [6]])
    ToDefault.set(shard="bulk").perform_in(60, 7)
    assert queued(r) == [[1], [4]]
    assert queued(sharded) == [[2], [3], [5], [6]]
    assert r.zcard("schedule") == 0 and sharded.zcard("schedule") == 1
    assert sharded.smembers("queues") == {b"default"}


def test_via_sends_every_push_in_the_block_to_that_shard(wurk: Wurk, r: Any, sharded: Any) -> None:
    with wurk.via("bulk"):
        assert wurk.shard == "bulk"
        ToDefault.perform_async(1)
        ToDefault.set(shard="default").perform_async(2)  # a named shard wins over the block's
    assert wurk.shard == "default"
    ToDefault.perform_async(3)
    assert queued(sharded) == [[1]]
    assert queued(r) == [[2], [3]]


def test_an_unknown_shard_fails_at_set_or_at_the_first_push_of_its_class(
    wurk: Wurk, r: Any, sharded: Any
) -> None:
    with pytest.raises(
        ValueError, match=r"no shard is named 'nope'; WURK\['SHARDS'\] names 'default', 'bulk'"
    ):
        ToDefault.set(shard="nope")
    with pytest.raises(UnknownShard, match="'nowhere'"):
        ToNowhere.perform_async(1)
    with pytest.raises(UnknownShard), wurk.via("nope"):
        pass
    assert queued(r) == [] and queued(sharded) == []


def test_a_batch_and_its_jobs_live_on_one_shard(wurk: Wurk, r: Any, sharded: Any) -> None:
    with wurk.via("bulk"):
        batch = Batch(description="on bulk")
        with batch.jobs():
            ToDefault.perform_async(1)
            ToBulk.perform_async(2)  # names the batch's own shard: fine
    assert queued(sharded) == [[1], [2]] and queued(r) == []
    assert sharded.exists(f"b-{batch.bid}") and not r.exists(f"b-{batch.bid}")
    assert all(json.loads(e)["bid"] == batch.bid for e in sharded.lrange("queue:default", 0, -1))

    other = Batch(description="on default")
    mismatch = "goes to shard 'bulk' but the open batch block writes to shard"
    with pytest.raises(ShardMismatch, match=mismatch), other.jobs():
        ToBulk.perform_async(3)
    assert queued(r) == [] and queued(sharded) == [[1], [2]]


def test_a_unique_lock_lives_on_its_jobs_shard(wurk: Wurk, r: Any, sharded: Any) -> None:
    assert UniqueOnBulk.perform_async(1) is not None
    assert UniqueOnBulk.perform_async(1) is None  # the lock on bulk holds
    assert [k for k in sharded.keys("unique:*")] and not r.keys("unique:*")
    # The same job on the default shard is another job, under another lock.
    assert UniqueOnBulk.set(shard="default").perform_async(1) is not None
    assert queued(sharded) == [[1]] and queued(r) == [[1]]


def test_shards_in_settings(clean_environment: None, settings: Any) -> None:
    settings.WURK = {"SHARDS": {"default": "redis://a:6379/0", "bulk": "redis://b:6379/0"}}
    config = build_config()
    assert config.redis_url == "redis://a:6379/0" and config.shard_names() == ("default", "bulk")
    assert config.shard_url("bulk") == "redis://b:6379/0"

    settings.WURK = {"REDIS_URL": "redis://a:6379/0", "SHARDS": {"default": "redis://c:6379/0"}}
    with pytest.raises(ConfigError, match=r"SHARDS.*REDIS_URL.*both set and differ"):
        build_config()
    settings.WURK = {"SHARDS": {"bulk": "http://b/"}}
    with pytest.raises(ConfigError, match=r"WURK\['SHARDS'\]: shard 'bulk': .*redis://"):
        build_config()
    settings.WURK = {"SHARDS": {"bad name": "redis://b:6379/0"}}
    with pytest.raises(ConfigError, match=r"WURK\['SHARDS'\]: a shard name"):
        build_config()
    settings.WURK = {"SHARDS": ["redis://b:6379/0"]}
    with pytest.raises(ConfigError, match=r"WURK\['SHARDS'\]: expected a dict"):
        build_config()
    settings.WURK = {"SHARDS": {"bulk": "redis://b:6379/0"}}
    with pytest.raises(ConfigError, match=r"WURK\['SHARD'\]: no shard is named 'other'"):
        build_config({"SHARD": "other"})
    environ = {"WURK_SHARDS": '{"bulk": "redis://e:6379/1"}', "WURK_SHARD": "bulk"}
    config = build_config(environ=environ)
    assert config.shard == "bulk" and config.shard_url("bulk") == "redis://e:6379/1"
    assert Config().shard_names() == ("default",)


def test_runwurk_shard_works_only_that_shard(
    wurk: Wurk,
    r: Any,
    sharded: Any,
    redis_url: str,
    bulk_redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811 - the fixture
) -> None:
    jobs.echo.perform_async("on default")
    jobs.echo.set(shard="bulk").perform_async("on bulk")
    shards = json.dumps({"bulk": bulk_redis_url})
    every_minute = [{"cron": "* * * * *", "job": "tests.jobsapp.jobs.PeriodicTick", "args": ["minute"]}]
    proc = start(
        redis_url, "--shard", "bulk", "-c", "2", WURK_SHARDS=shards, WURK_PERIODIC=json.dumps(every_minute)
    )
    stop_later.append(proc)
    identity = identity_of(sharded, proc.pid)
    # The job ran there, and wrote (through wurk.redis, inside the job) to its own shard.
    wait_for(lambda: sharded.llen("seen:echo") == 1, timeout=30)
    assert json.loads(sharded.lindex("seen:echo", 0)) == ["on bulk"]
    assert sharded.llen("queue:default") == 0
    # Nothing of it touched the default shard: its job waits, no process registered there.
    assert queued(r) == [["on default"]]
    assert not r.exists("seen:echo") and not r.smembers("processes")
    assert identity in {m.decode() for m in sharded.smembers("processes")}
    # It leads its shard, but the settings' periodic entries fire from the default shard's
    # leader only, so they fire once fleet-wide: nothing is registered on bulk.
    wait_for(lambda: sharded.get("wurk-leader") is not None, timeout=30)
    assert not sharded.exists("periodic") and not r.exists("periodic")
    proc.terminate()
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "(shard 'bulk')" in stderr


@pytest.mark.django_db(transaction=True)
def test_a_push_deferred_to_the_commit_still_goes_to_its_shard(
    wurk: Wurk, r: Any, sharded: Any, use_app_settings: Any
) -> None:
    from django.db import transaction

    use_app_settings(enqueue="on_commit")
    with transaction.atomic():
        ToBulk.perform_async(1)
        with wurk.via("bulk"):
            ToDefault.perform_async(2)
        assert queued(sharded) == []
    # After the commit, outside any via() block: the delivery carried the shard.
    assert queued(sharded) == [[1], [2]] and queued(r) == []

    use_app_settings(enqueue="outbox")
    with pytest.raises(Exception, match="relays to the 'default' shard only"), transaction.atomic():
        ToBulk.perform_async(3)


@pytest.mark.django_db(transaction=True)
def test_a_batch_written_at_the_commit_is_written_on_its_shard(
    wurk: Wurk, r: Any, sharded: Any, use_app_settings: Any
) -> None:
    from django.db import transaction

    use_app_settings(enqueue="on_commit")
    with transaction.atomic():
        with wurk.via("bulk"):
            batch = Batch(description="after commit")
            with batch.jobs():
                ToDefault.perform_async(1)
        assert not sharded.exists(f"b-{batch.bid}")
    assert sharded.exists(f"b-{batch.bid}") and not r.exists(f"b-{batch.bid}")
    assert queued(sharded) == [[1]] and queued(r) == []


def test_a_periodic_fire_goes_to_its_job_classs_shard_from_a_leader_on_another(
    wurk: Wurk, r: Any, sharded: Any
) -> None:
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    from django_wurk.api import LoopSet
    from django_wurk.core.features.periodic.loops import LoopSpec
    from django_wurk.core.features.periodic.ticker import Ticker

    class EveryMinute:
        expression = "* * * * *"

        def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
            return moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)

    t0 = datetime(2020, 1, 1, tzinfo=UTC).timestamp()  # in the past: Redis agrees it is due
    s = LoopSpec(EveryMinute(), ToBulk, args=("tick",))
    ticker = Ticker(wurk, [s])  # the leader of the default shard
    ticker.take_office(t0)
    [fired] = ticker.tick(t0 + 60.5)
    assert queued(sharded) == [["tick"]] and queued(r) == []
    # The loop and its history stay with the leader, on the default shard.
    [loop] = list(LoopSet(wurk))
    assert [f.jid for f in loop.history()] == [fired.jid]
    assert loop.enqueue_now() is not None
    assert queued(sharded) == [["tick"], ["tick"]] and queued(r) == []


def test_a_platforms_redis_url_never_conflicts_with_shards_default(
    clean_environment: None, settings: Any
) -> None:
    settings.WURK = {"SHARDS": {"default": "redis://a:6379/0"}}
    config = build_config(environ={"REDIS_URL": "redis://cache:6379/0"})
    assert config.redis_url == "redis://a:6379/0"
    settings.WURK = {}
    assert build_config(environ={"REDIS_URL": "redis://cache:6379/0"}).redis_url == "redis://cache:6379/0"


def test_the_testing_modes_record_jobs_whatever_their_shard(wurk: Wurk, r: Any) -> None:
    from django_wurk.testing import fake

    # No SHARDS here, as in a project's test settings: the fake queue still takes the job.
    with fake() as queues:
        ToBulk.perform_async(1)
        ToDefault.set(shard="default").perform_async(2)
    assert [j["args"] for j in queues.all()] == [[1], [2]]
    assert queued(r) == []


def test_a_shard_may_be_a_sentinel_url(clean_environment: None, settings: Any) -> None:
    settings.WURK = {"SHARDS": {"bulk": "redis+sentinel://s1:26379,s2:26379/bulk-master/0"}}
    assert build_config().shard_url("bulk") == "redis+sentinel://s1:26379,s2:26379/bulk-master/0"
