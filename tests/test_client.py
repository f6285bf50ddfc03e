"""Enqueueing: the bytes we write must be the bytes Sidekiq's client writes."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.core.backlog import Backlog
from django_wurk.core.wire import TimestampStyle
from django_wurk.core.writer import Kept, Writer
from tests.conftest import queue_entries, wait_for
from tests.jobsapp import jobs


def test_perform_async_writes_sidekiqs_shape(wurk: Wurk, r: Any) -> None:
    before = time.time()
    jid = jobs.echo.perform_async(1, "two", {"three": 3.5}, None, True)
    [stored] = r.lrange("queue:default", 0, -1)
    payload = json.loads(stored)
    # Key order as Ruby's client writes it: defaults, args/class, then jid and times.
    assert list(payload) == ["retry", "queue", "args", "class", "jid", "created_at", "enqueued_at"]
    assert payload["jid"] == jid and len(jid) == 24
    assert payload["class"] == "tests.jobsapp.jobs.echo"
    assert payload["args"] == [1, "two", {"three": 3.5}, None, True]
    assert payload["retry"] is True and payload["queue"] == "default"
    assert isinstance(payload["created_at"], float) and isinstance(payload["enqueued_at"], float)
    assert before <= payload["created_at"] <= payload["enqueued_at"] <= time.time()
    assert r.smembers("queues") == {b"default"}
    assert b'"args":[1,"two",{"three":3.5},null,true]' in stored


def test_millisecond_timestamps_match_sidekiq_8(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(timestamps=TimestampStyle.INT_MILLISECONDS))
    jobs.echo.perform_async(1)
    [payload] = queue_entries(wurk.redis)
    assert isinstance(payload["created_at"], int) and isinstance(payload["enqueued_at"], int)
    assert abs(payload["enqueued_at"] / 1000 - time.time()) < 5


def test_perform_in_schedules_without_enqueued_at(wurk: Wurk, r: Any) -> None:
    before = time.time()
    jid = jobs.echo.perform_in(3600, "later")
    [(member, score)] = r.zrange("schedule", 0, -1, withscores=True)
    payload = json.loads(member)
    assert payload["jid"] == jid and "enqueued_at" not in payload and "at" not in payload
    assert before + 3600 <= score <= time.time() + 3600
    assert r.llen("queue:default") == 0


def test_perform_bulk_keeps_order_and_batches(wurk: Wurk, r: Any) -> None:
    jids = jobs.echo.perform_bulk([(i,) for i in range(25)], batch_size=10)
    assert len(jids) == 25 and len(set(jids)) == 25
    # BRPOP takes from the tail: the first argument tuple is the first job fetched.
    popped = [json.loads(r.rpop("queue:default"))["args"] for _ in range(25)]
    assert popped == [[i] for i in range(25)]
    with pytest.raises(TypeError, match="item 1"):
        jobs.echo.perform_bulk([(1,), 2])  # type: ignore[list-item]


def test_bulk_push_shares_one_enqueued_at_per_batch(wurk: Wurk, r: Any) -> None:
    jobs.echo.perform_bulk([(1,), (2,), (3,)])
    stamps = {p["enqueued_at"] for p in queue_entries(r)}
    assert len(stamps) == 1


def test_bulk_entries_are_the_bytes_a_single_push_writes(wurk: Wurk, r: Any) -> None:
    """Bulk pushes encode shared fields once; the stored bytes must not differ for it."""
    from django_wurk.core import wire

    args = [(i, "ünïcødé ✓", {"n": [1.5, None]}) for i in range(5)]
    jobs.echo.set(tags=["a"]).perform_bulk(args)
    jobs.echo.set(tags=["a"]).perform_bulk(args[:3], batch_size=1)
    jobs.echo.perform_in(3600, "x")
    jobs.echo.set(queue="other").perform_bulk([(1,), (2,)])
    entries = r.lrange("queue:default", 0, -1) + r.lrange("queue:other", 0, -1) + r.zrange("schedule", 0, -1)
    assert len(entries) == 11
    for raw in entries:
        assert wire.dumps(json.loads(raw)).encode() == raw


def test_a_thread_that_finds_the_pool_empty_waits_for_a_connection(wurk: Wurk, test_config: Config) -> None:
    """A full pool makes the next caller wait, as Sidekiq's connection_pool does, not fail at once."""
    import threading

    import redis as redis_lib

    from tests.conftest import wait_for

    wurk.configure(test_config.replace(redis_pool_size=1))
    client = wurk.redis
    observer = redis_lib.Redis.from_url(test_config.redis_url)
    holder = threading.Thread(target=lambda: client.blpop("nothing-comes", timeout=1))
    holder.start()
    try:
        # The pool's only connection is now inside a BLPOP that gives it back within a second.
        wait_for(lambda: any(c.get("cmd") == "blpop" for c in observer.client_list()))
        assert client.ping() is True
    finally:
        holder.join()
        observer.close()


class PausingBacklog(Backlog[Kept]):
    """The writer's outage buffer, holding each thread just after it found the buffer empty
    and let go of the lock.

    That moment is the gap: the thread has decided to stop but is still alive.
    """

    def __init__(self, writer: Writer) -> None:
        super().__init__(
            "client-buffer",
            writer._replay,
            writer._lost,
            limit=lambda: writer.wurk.config.client_buffer,
            size=lambda kept: len(kept.payloads),
            first_delay=0.1,
            max_delay=5.0,
        )
        self.emptied = threading.Event()
        self.leave = threading.Event()

    def _run(self) -> None:
        super()._run()
        self.emptied.set()
        self.leave.wait(30)


def test_a_push_buffered_while_the_drain_thread_is_leaving_is_still_sent(r: Any, test_config: Config) -> None:
    down = test_config.replace(redis_url="redis://127.0.0.1:1/0", client_buffer=10, redis_socket_timeout=0.5)
    up = test_config.replace(client_buffer=10)
    engine = Wurk()  # its own engine, so Redis can be made unreachable for it alone
    engine.configure(down)
    pusher = engine.writer
    buffer = pusher.outage = PausingBacklog(pusher)
    try:
        pusher.push([{"class": "Gap", "queue": "gap", "args": [1], "jid": "1" * 24}], None)
        assert pusher.buffered == 1  # Redis is unreachable: kept, and a drain thread started
        engine.configure(up)
        assert buffer.emptied.wait(30)  # sent; its drain thread is on its way out
        engine.configure(down)
        pusher.push([{"class": "Gap", "queue": "gap", "args": [2], "jid": "2" * 24}], None)
        assert pusher.buffered == 1
        engine.configure(up)
        buffer.leave.set()
        wait_for(lambda: r.llen("queue:gap") == 2)
        assert [json.loads(x)["args"] for x in r.lrange("queue:gap", 0, -1)] == [[2], [1]]
    finally:
        buffer.leave.set()
        engine.reset()
