"""The Celery broker drain: a real Celery 5 producer on a real Redis broker, drained into wurk.

The broker is a Valkey server of its own, so its keys never mix with wurk's.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from django_wurk import Wurk
from django_wurk.celery import lookup
from django_wurk.celery.drain import Drain, Tally, decode
from tests import test_runwurk
from tests.conftest import start_valkey, wait_for
from tests.jobsapp import celery_drain_tasks
from tests.test_runwurk import start, worker_env


@pytest.fixture(scope="module")
def broker_server() -> Iterator[Any]:
    server = start_valkey()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def broker_url(broker_server: Any) -> str:
    url = f"{broker_server.connection_url}/0"
    with redis_lib.Redis.from_url(url) as client:
        client.flushdb()
    return url


@pytest.fixture
def broker(broker_url: str) -> Iterator[redis_lib.Redis]:
    with redis_lib.Redis.from_url(broker_url) as client:
        yield client


@pytest.fixture
def celery_app(broker_url: str) -> Iterator[Any]:
    """A Celery app of the kind being migrated away from: it only sends."""
    from celery import Celery

    app = Celery("legacy", broker=broker_url, set_as_current=False)
    app.conf.broker_connection_retry_on_startup = False

    @app.task(name="legacy.add", shared=False)  # only on this app, never on later ones
    def add(a: Any, b: Any, **kw: Any) -> Any:
        return a

    app.legacy_add = add
    try:
        yield app
    finally:
        app.close()


ROOT = Path(__file__).resolve().parents[1]
stop_later = test_runwurk.stop_later  # the fixture that kills subprocesses a test left running


def drain(wurk: Wurk, broker_url: str, **options: Any) -> Tally:
    """The drain in this process, calling the real task layer."""
    return Drain(
        broker_url=broker_url, queues=options.pop("queues", ["celery"]), wurk=wurk, lookup=lookup, **options
    ).run()


def drain_command(broker_url: str, redis_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "django", "wurk_drain_celery", "--broker", broker_url, *args]


def start_drain(broker_url: str, redis_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        drain_command(broker_url, redis_url, *args),
        cwd=ROOT,
        env=worker_env(redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


#: Seconds until the countdown job of the first test comes due: longer than a drain takes on
#: a loaded machine (10 s was not: the job was then due at the drain, and pushed, not scheduled).
COUNTDOWN = 30


def run_drain(broker_url: str, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        drain_command(broker_url, redis_url, *args),
        cwd=ROOT,
        env=worker_env(redis_url),
        capture_output=True,
        text=True,
        timeout=120,
    )


def runs(r: Any) -> dict[str, dict[str, Any]]:
    return {run["id"]: run for run in map(json.loads, r.lrange(celery_drain_tasks.RUNS, 0, -1))}


def jobs(r: Any) -> dict[str, dict[str, Any]]:
    found = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    found += [json.loads(x) for x in r.zrange("schedule", 0, -1)]
    return {job["jid"]: job for job in found}


def dead(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.zrange("dead", 0, -1)]


def broker_lists(broker: redis_lib.Redis) -> dict[bytes, int]:
    return {k: broker.llen(k) for k in broker.keys("*") if broker.type(k) == b"list" and broker.llen(k)}


def test_every_message_becomes_one_job_and_the_workers_run_them(
    wurk: Wurk,
    r: Any,
    broker: redis_lib.Redis,
    broker_url: str,
    redis_url: str,
    celery_app: Any,
    stop_later: list[subprocess.Popen[str]],
) -> None:
    add = celery_app.legacy_add
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    token = uuid.uuid4()
    plain = add.delay(1, 2)
    # Due well after the drain, however slow the machine: a job already due is pushed at once.
    rich = add.apply_async((when, Decimal("1.50")), {"token": token}, countdown=COUNTDOWN, expires=3600)
    sent = celery_app.send_task(
        "legacy.add", args=[5], kwargs={"b": 6}, retries=2, time_limit=30, soft_time_limit=20
    )
    unknown = celery_app.send_task("legacy.gone", args=[7])
    etas = {m.id: m.eta for m in map(decode, broker.lrange("celery", 0, -1))}

    done = run_drain(broker_url, redis_url)

    assert done.returncode == 0, done.stderr
    assert "drained: moved 3, dead 1, skipped 0" in done.stdout
    found = jobs(r)
    assert set(found) == {plain.id, rich.id, sent.id}  # the Celery task id is the jid
    assert found[plain.id]["class"] == "legacy.add"
    assert found[plain.id]["args"] == [1, 2]
    assert found[sent.id]["args"] == [5] and found[sent.id]["kwargs"] == {"b": 6}
    # Celery's timelimit header became the job's time limits; a message without one sets none.
    assert (found[sent.id]["timeout"], found[sent.id]["soft_timeout"]) == (30, 20)
    assert "timeout" not in found[plain.id] and "soft_timeout" not in found[plain.id]
    scheduled = {json.loads(m)["jid"]: s for m, s in r.zrange("schedule", 0, -1, withscores=True)}
    assert list(scheduled) == [rich.id]  # the countdown became a scheduled job, at Celery's ETA
    eta = dt.datetime.fromisoformat(str(etas[rich.id]))
    assert scheduled[rich.id] == pytest.approx(eta.timestamp())
    assert found[rich.id]["expires_at"] == pytest.approx(eta.timestamp() + 3600 - COUNTDOWN, abs=1)
    [buried] = dead(r)
    assert buried["error_class"] == "UnknownCeleryTask" and unknown.id in buried["error_message"]
    assert broker_lists(broker) == {}
    assert broker.get("wurk-celery-drain") is None  # the lease was given back

    stop_later.append(start(redis_url, "-c", "2", "-q", "default"))
    wait_for(
        lambda: len(runs(r)) == 3, timeout=COUNTDOWN + 60
    )  # the countdown job comes due after COUNTDOWN s
    ran = runs(r)
    assert ran[plain.id]["args"] == [["int", "1"], ["int", "2"]]
    assert ran[sent.id]["kwargs"] == {"b": ["int", "6"]}
    assert ran[sent.id]["retries"] == 2 and ran[plain.id]["retries"] == 0  # Celery's retry count
    # kombu's JSON envelopes came back as the objects Celery would have handed the task.
    assert ran[rich.id]["args"] == [["datetime", str(when)], ["Decimal", "1.50"]]
    assert ran[rich.id]["kwargs"] == {"token": ["UUID", str(token)]}


def test_unknown_task_and_pickle_go_to_the_dead_set_with_the_message_kept(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    unknown = celery_app.send_task("legacy.gone", args=[1])
    pickled = celery_app.send_task("legacy.add", args=[1, 2], serializer="pickle")
    raw_unknown, raw_pickled = broker.lrange("celery", 0, -1)[::-1]

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead) == (0, 2)
    entries = {e["error_class"]: e for e in dead(r)}
    assert set(entries) == {"UnknownCeleryTask", "RefusedSerializer"}
    assert "legacy.gone" in entries["UnknownCeleryTask"]["error_message"]
    assert unknown.id in entries["UnknownCeleryTask"]["error_message"]
    assert "pickle" in entries["RefusedSerializer"]["error_message"]
    # The whole broker message, byte for byte: it can be pushed back onto the broker as is.
    assert entries["UnknownCeleryTask"]["args"] == [raw_unknown.decode()]
    assert entries["RefusedSerializer"]["args"] == [raw_pickled.decode()]
    assert entries["UnknownCeleryTask"]["queue"] == "celery"
    assert broker_lists(broker) == {}
    assert pickled.id not in jobs(r)


def test_garbage_on_the_broker_goes_to_the_dead_set_and_the_drain_goes_on(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    good = celery_app.legacy_add.delay(1, 2)
    garbage = [
        b"not json",
        b"\xff\xfe\x00",
        b"[1, 2]",
        b'{"body": 5, "properties": {}}',
        b'{"body": "!!!", "properties": {"body_encoding": "base64"}, "content-type": "application/json"}',
        json.dumps(
            {
                "body": base64.b64encode(b'{"args": 1}').decode(),
                "properties": {"body_encoding": "base64"},
                "content-type": "application/json",
                "headers": {"task": "legacy.add", "id": "x"},
            }
        ).encode(),
        b"[" * 100_000,
    ]
    broker.lpush("celery", *garbage)
    later = celery_app.legacy_add.delay(3, 4)

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead) == (2, len(garbage))
    assert set(jobs(r)) == {good.id, later.id}
    buried = dead(r)
    assert len(buried) == len(garbage)
    kept = {
        base64.b64decode(e["payload_base64"]) if "payload_base64" in e else e["args"][0].encode()
        for e in buried
    }
    assert kept == set(garbage)
    assert all(e["error_message"] for e in buried)
    assert broker_lists(broker) == {}


def test_a_message_held_by_a_killed_drain_is_finished_once(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    first = celery_app.legacy_add.delay(1, 2)
    second = celery_app.legacy_add.delay(3, 4)
    # A drain killed after pushing `first` but before removing it from its held list.
    raw = broker.rpoplpush("celery", "wurk-celery-drain:held:celery")
    tag = decode(raw).delivery
    drain_once = Drain(broker_url=broker_url, queues=["celery"], wurk=wurk, lookup=lookup)
    drain_once.handle("celery", raw)
    assert set(jobs(r)) == {first.id}

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.skipped) == (1, 1)
    assert sorted(json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)) == sorted(
        [first.id, second.id]
    )
    assert r.get(f"wurk-celery-drain:pushed:{tag}") == first.id.encode()
    assert broker_lists(broker) == {}


def test_kill_9_mid_way_loses_nothing_and_pushes_nothing_twice(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, redis_url: str, celery_app: Any
) -> None:
    sent = {celery_app.legacy_add.delay(i, i).id for i in range(2000)}
    first = start_drain(broker_url, redis_url, "--lease-seconds", "1")
    try:
        wait_for(lambda: r.llen("queue:default") >= 300, timeout=60)
        first.kill()
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    landed = r.llen("queue:default")
    assert landed < 2000, "the drain finished before it could be killed mid-way"

    # The restart waits for the killed drain's lease to expire, then finishes its held message.
    second = run_drain(broker_url, redis_url, "--lease-seconds", "1")

    assert second.returncode == 0, second.stderr
    pushed = [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)]
    assert set(pushed) == sent  # none lost
    assert len(pushed) == len(sent)  # none pushed twice
    assert dead(r) == []
    assert broker_lists(broker) == {}
    # The restart moved the rest; a message the killed drain had pushed but not yet removed
    # from its held list is the only one it may find pushed already, and it skips that one.
    summary = second.stdout.split("drained: ")[1]
    moved = int(summary.split("moved ")[1].split(",")[0])
    skipped = int(summary.split("skipped ")[1].split()[0])
    assert moved == 2000 - landed
    assert skipped in (0, 1)


def test_protocol_1_messages_and_plain_callbacks_are_moved_and_chords_kept_in_the_dead_set(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    from celery import Celery, chain, group

    add = celery_app.legacy_add
    linked = add.apply_async((1, 2), link=add.si(3, 4), link_error=add.s())
    grouped = add.apply_async((1, 2), link=group(add.si(1, 1), add.si(2, 2)))
    # Celery sends chords only with a result backend; a group inside a chain is one.
    # An in-memory backend: a Redis one's AsyncResults unsubscribe when collected, which
    # reconnected to this broker long after it stopped, inside later tests (20 s of retries,
    # and once a broken ast.parse that a collection ran inside).
    with Celery("legacy", broker=broker_url, backend="cache+memory://", set_as_current=False) as backed:
        step = functools.partial(backed.signature, "legacy.add", immutable=True)
        first = chain(step((5, 6)), group(step((7, 8)), step((9, 10))), step((11, 12))).apply_async()
        while first.parent is not None:
            first = first.parent
        chord_start = first.id
    celery_app.conf.task_protocol = 1
    old = add.apply_async((9,), {"b": 10, "c": 11}, countdown=60, link=add.si(5))

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead) == (2, 2)
    assert jobs(r)[old.id]["args"] == [9] and jobs(r)[old.id]["kwargs"] == {"b": 10, "c": 11}
    assert r.zscore("schedule", r.zrange("schedule", 0, -1)[0]) > dt.datetime.now(dt.UTC).timestamp() + 30
    # Plain callbacks became the job's link and link_error (protocol 2's embed, protocol 1's body).
    moved = jobs(r)[linked.id]
    assert [(s["task"], s["args"], s["immutable"]) for s in moved["link"]] == [("legacy.add", [3, 4], True)]
    assert [(s["task"], s["immutable"]) for s in moved["link_error"]] == [("legacy.add", False)]
    assert [(s["task"], s["args"]) for s in jobs(r)[old.id]["link"]] == [("legacy.add", [5])]
    assert [e["error_class"] for e in dead(r)] == ["UnsupportedCeleryWorkflow"] * 2
    messages = " ".join(e["error_message"] for e in dead(r))
    assert grouped.id in messages and "callbacks" in messages and "group" in messages
    assert chord_start in messages and "chord" in messages
    assert broker_lists(broker) == {}


def test_a_celery_chain_is_drained_and_its_steps_run_in_order_on_the_workers(
    wurk: Wurk,
    r: Any,
    broker: redis_lib.Redis,
    broker_url: str,
    redis_url: str,
    celery_app: Any,
    stop_later: list[subprocess.Popen[str]],
) -> None:
    from celery import chain

    from django_wurk.celery import AsyncResult

    step = functools.partial(celery_app.signature, "legacy.append")
    sent = chain(step(([], "a")), step(("b",)), step(("c",), immutable=False)).apply_async()
    ids = [sent.parent.parent.id, sent.parent.id, sent.id]
    [raw] = broker.lrange("celery", 0, -1)
    assert len(decode(raw).chain) == 2  # Celery embeds the rest of the chain in the first message

    done = run_drain(broker_url, redis_url)

    assert done.returncode == 0, done.stderr
    assert "drained: moved 1, dead 0, skipped 0" in done.stdout
    [job] = jobs(r).values()
    assert job["jid"] == ids[0] and [s["task"] for s in job["chain"]] == ["legacy.append"] * 2
    stop_later.append(start(redis_url, "-c", "2", "-q", "default"))
    assert AsyncResult(sent.id).get(timeout=30) == ["a", "b", "c"]
    assert [run["id"] for run in map(json.loads, r.lrange(celery_drain_tasks.RUNS, 0, -1))] == ids
    assert AsyncResult(ids[1]).get(timeout=1) == ["a", "b"]  # each step kept its Celery task id


def test_one_drain_per_broker(wurk: Wurk, broker: redis_lib.Redis, broker_url: str) -> None:
    from django_wurk.celery.drain import BrokerError

    broker.set("wurk-celery-drain", "someone-else", px=60_000)
    with pytest.raises(BrokerError, match="another drain is working on this broker"):
        drain(wurk, broker_url, lease_seconds=0.5)


def test_follow_moves_new_messages_until_stopped(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    import threading

    worker = Drain(
        broker_url=broker_url,
        queues=["celery", "other"],
        wurk=wurk,
        lookup=lookup,
        follow=True,
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        first = celery_app.legacy_add.delay(1, 2)
        wait_for(lambda: first.id in jobs(r))
        second = celery_app.legacy_add.apply_async((3, 4), queue="other")
        third = celery_app.legacy_add.apply_async((5, 6), priority=9)
        wait_for(lambda: {second.id, third.id} <= set(jobs(r)))
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert worker.tally.moved == 3
    assert broker_lists(broker) == {}


def test_limit_stops_after_that_many_messages(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    sent = [celery_app.legacy_add.delay(i, i).id for i in range(5)]
    tally = drain(wurk, broker_url, limit=2)
    assert tally.moved == 2
    assert set(jobs(r)) == set(sent[:2])  # oldest first, as Celery's workers take them
    assert broker.llen("celery") == 3


def test_a_broker_that_is_not_redis_is_refused_readably(wurk: Wurk) -> None:
    from django_wurk.celery.drain import BrokerError

    # (An unreachable one: test_the_command_says_what_is_wrong_and_exits_non_zero.)
    with pytest.raises(
        BrokerError, match=r"reads Redis brokers only \(redis://, rediss://, sentinel://\)"
    ) as raised:
        drain(wurk, "amqp://guest:secret@127.0.0.1:1//")
    assert "secret" not in str(raised.value)


def test_when_wurks_redis_fails_the_message_stays_held_for_the_next_drain(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any, test_config: Any
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    sent = celery_app.legacy_add.delay(1, 2)
    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0"))
    with pytest.raises(RedisConnectionError):
        drain(wurk, broker_url)
    assert broker.lrange("wurk-celery-drain:held:celery", 0, -1) != []
    assert broker.get("wurk-celery-drain") is None

    wurk.configure(test_config)
    tally = drain(wurk, broker_url)
    assert tally.moved == 1
    assert set(jobs(r)) == {sent.id}
    assert broker_lists(broker) == {}


@pytest.mark.django_db(transaction=True)
def test_the_push_is_immediate_even_in_a_transaction_or_with_the_outbox(
    wurk: Wurk, r: Any, broker_url: str, celery_app: Any, use_app_settings: Any
) -> None:
    from django.db import transaction

    from django_wurk.models import OutboxEntry

    use_app_settings(enqueue="outbox")
    first = celery_app.legacy_add.delay(1, 2)
    with transaction.atomic():
        drain(wurk, broker_url)
        # Acknowledged on the broker already, so it must be in Redis now, not at the commit.
        assert set(jobs(r)) == {first.id}
    assert OutboxEntry.objects.count() == 0


def test_a_message_the_task_refuses_goes_to_the_dead_set(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    bad_id = celery_app.send_task("legacy.add", args=[1], task_id="has a space")
    bad_eta = celery_app.legacy_add.delay(2, 3)
    raw = json.loads(broker.lindex("celery", 0))
    raw["headers"]["eta"] = "next tuesday"
    broker.lset("celery", 0, json.dumps(raw))

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead) == (0, 2)
    reasons = " ".join(e["error_message"] for e in dead(r))
    assert "task_id" in reasons and bad_id.id in reasons
    assert "eta" in reasons and bad_eta.id in reasons
    assert {e["error_class"] for e in dead(r)} == {"CeleryTaskRefused"}


def test_the_command_says_what_is_wrong_and_exits_non_zero(redis_url: str) -> None:
    unreachable = run_drain("redis://:secret@127.0.0.1:1/0", redis_url)
    assert unreachable.returncode == 1
    assert "cannot reach the Celery broker at redis://:***@127.0.0.1:1/0" in unreachable.stderr
    assert "secret" not in unreachable.stderr + unreachable.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "django", "wurk_drain_celery"],
        cwd=ROOT,
        env=worker_env(redis_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert "--broker" in missing.stderr and "CELERY_BROKER_URL" in missing.stderr


def test_restore_unacked_gives_back_what_a_killed_celery_worker_held(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    from kombu import Connection

    held = celery_app.legacy_add.delay(1, 2)
    waiting = celery_app.legacy_add.delay(3, 4)
    elsewhere = celery_app.legacy_add.apply_async((5, 6), queue="reports")
    # Celery workers take messages into kombu's unacked hash; killed, nothing gives them back.
    with Connection(broker_url) as connection:
        channel = connection.default_channel
        assert channel.basic_get("celery") is not None
        assert channel.basic_get("reports") is not None
        channel.qos.restore_at_shutdown = False
    broker.hset("unacked", "junk-tag", b"\xff not json")
    assert broker.hlen("unacked") == 3

    assert drain(wurk, broker_url).moved == 1  # without the option the held one stays there
    assert set(jobs(r)) == {waiting.id}

    worker = Drain(broker_url=broker_url, queues=["celery"], wurk=wurk, lookup=lookup, restore_unacked=True)
    assert worker.run().moved == 1
    assert worker.restored == 1
    assert set(jobs(r)) == {waiting.id, held.id}
    # Another queue's message and an entry that is not kombu's are left where they are.
    assert broker.hlen("unacked") == 2 and broker.hexists("unacked", "junk-tag")
    assert broker.zcard("unacked_index") == 1
    assert elsewhere.id not in jobs(r)


def test_a_full_dead_set_stops_the_drain_rather_than_trim_a_message_away(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any, test_config: Any
) -> None:
    from django_wurk.celery.drain import DeadSetFull

    wurk.configure(test_config.replace(dead_max_jobs=4))
    sent = [celery_app.send_task("legacy.gone", args=[i]).id for i in range(5)]
    with pytest.raises(DeadSetFull, match=r"DEAD_MAX_JOBS'\] = 4"):
        drain(wurk, broker_url)
    kept = [e["error_message"] for e in dead(r)]
    assert len(kept) == 3
    assert all(any(i in m for m in kept) for i in sent[:3])
    # The fourth is held, the fifth still queued: both there for the next drain.
    assert broker.llen("wurk-celery-drain:held:celery") == 1 and broker.llen("celery") == 1


def test_follow_runs_until_sigterm_and_then_exits_cleanly(
    wurk: Wurk,
    r: Any,
    broker: redis_lib.Redis,
    broker_url: str,
    redis_url: str,
    celery_app: Any,
    stop_later: list[subprocess.Popen[str]],
) -> None:
    import signal

    following = start_drain(broker_url, redis_url, "--follow")
    stop_later.append(following)
    sent = celery_app.legacy_add.delay(1, 2)
    wait_for(lambda: sent.id in jobs(r), timeout=30)
    later = celery_app.legacy_add.delay(3, 4)
    wait_for(lambda: later.id in jobs(r), timeout=30)
    following.send_signal(signal.SIGTERM)
    out, err = following.communicate(timeout=30)
    assert following.returncode == 0, err
    assert "drained: moved 2, dead 0, skipped 0" in out
    assert broker_lists(broker) == {}
    assert broker.get("wurk-celery-drain") is None


def test_bad_celery_settings_are_named() -> None:
    from django.core.management import CommandError, call_command
    from django.test import override_settings

    with (
        override_settings(CELERY_BROKER_URL=["redis://"]),
        pytest.raises(CommandError, match="CELERY_BROKER_URL"),
    ):
        call_command("wurk_drain_celery")
    with (
        override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0", CELERY_BROKER_TRANSPORT_OPTIONS="x"),
        pytest.raises(CommandError, match="CELERY_BROKER_TRANSPORT_OPTIONS must be a dict"),
    ):
        call_command("wurk_drain_celery")


def test_an_eager_task_stops_the_drain_instead_of_running_here(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    from django_wurk.celery.drain import DrainError

    celery_app.legacy_add.delay(1, 2)
    app = celery_drain_tasks.add.app
    app.conf["task_always_eager"] = True
    try:
        with pytest.raises(DrainError, match="task_always_eager"):
            drain(wurk, broker_url)
    finally:
        app.conf["task_always_eager"] = False
    assert r.llen(celery_drain_tasks.RUNS) == 0  # it did not run here
    assert broker.llen("wurk-celery-drain:held:celery") == 1  # and waits for the next drain
    assert drain(wurk, broker_url).moved == 1
