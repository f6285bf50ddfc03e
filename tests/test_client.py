"""Enqueueing: the bytes we write must be the bytes Sidekiq's client writes."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Config, Job, Wurk, job
from django_wurk.core.client import BufferedPusher, RedisPusher
from django_wurk.core.wire import TimestampStyle
from tests.conftest import wait_for
from tests.jobsapp import jobs


def queue_entries(r: Any, name: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{name}", 0, -1)]


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


def test_class_options_are_written_like_sidekiq_options(wurk: Wurk, r: Any) -> None:
    jobs.critical.perform_async("x")
    [payload] = queue_entries(r, "critical")
    # Ruby's CriticalJob (sidekiq_options queue: "critical", retry: 5, backtrace: 3, tags: ["alpha"]).
    assert list(payload)[:6] == ["retry", "queue", "backtrace", "tags", "args", "class"]
    assert (payload["retry"], payload["queue"], payload["backtrace"], payload["tags"]) == (
        5,
        "critical",
        3,
        ["alpha"],
    )


def test_millisecond_timestamps_match_sidekiq_8(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(timestamps=TimestampStyle.INT_MILLISECONDS))
    jobs.echo.perform_async(1)
    [payload] = queue_entries(wurk.redis)
    assert isinstance(payload["created_at"], int) and isinstance(payload["enqueued_at"], int)
    assert abs(payload["enqueued_at"] / 1000 - time.time()) < 5


def test_set_overrides_options_and_carries_unknown_ones(wurk: Wurk, r: Any) -> None:
    jobs.echo.set(queue="low", retry=False, tags=["t"], locale="fr").perform_async(7)
    [payload] = queue_entries(r, "low")
    assert payload["queue"] == "low" and payload["retry"] is False
    assert payload["tags"] == ["t"] and payload["locale"] == "fr"
    assert r.smembers("queues") == {b"low"}


def test_perform_in_schedules_without_enqueued_at(wurk: Wurk, r: Any) -> None:
    before = time.time()
    jid = jobs.echo.perform_in(3600, "later")
    [(member, score)] = r.zrange("schedule", 0, -1, withscores=True)
    payload = json.loads(member)
    assert payload["jid"] == jid and "enqueued_at" not in payload and "at" not in payload
    assert before + 3600 <= score <= time.time() + 3600
    assert r.llen("queue:default") == 0


def test_perform_in_accepts_timedelta_and_absolute_epochs(wurk: Wurk, r: Any) -> None:
    jobs.echo.perform_in(timedelta(minutes=5), 1)
    absolute = time.time() + 7200
    jobs.echo.perform_in(absolute, 2)  # >= 1e9: an epoch, as in Sidekiq
    scores = sorted(s for _, s in r.zrange("schedule", 0, -1, withscores=True))
    assert scores[0] == pytest.approx(time.time() + 300, abs=5)
    assert scores[1] == pytest.approx(absolute, abs=0.001)


def test_already_due_jobs_go_straight_to_the_queue(wurk: Wurk, r: Any) -> None:
    jobs.echo.perform_in(0, "now")
    jobs.echo.perform_at(time.time() - 60, "past")
    assert r.zcard("schedule") == 0
    assert [p["args"] for p in queue_entries(r)] == [["past"], ["now"]]
    assert all("enqueued_at" in p for p in queue_entries(r))


def test_perform_at_needs_an_aware_datetime(wurk: Wurk, r: Any) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    jobs.echo.perform_at(when, 1)
    [(_, score)] = r.zrange("schedule", 0, -1, withscores=True)
    assert score == pytest.approx(when.timestamp())
    with pytest.raises(ValueError, match="aware datetime"):
        jobs.echo.perform_at(datetime.now() + timedelta(hours=1), 1)


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


def test_non_json_arguments_are_refused_at_enqueue(wurk: Wurk, r: Any) -> None:
    with pytest.raises(TypeError, match=r"args\[1\] is a datetime.datetime"):
        jobs.echo.perform_async(1, datetime.now(UTC))
    assert r.llen("queue:default") == 0


def test_client_middleware_can_change_or_drop_a_push(wurk: Wurk, r: Any) -> None:
    seen: list[tuple[str, str]] = []

    class Stamp:
        def __init__(self, value: str) -> None:
            self.value = value

        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            seen.append((job_class, queue))
            payload["stamp"] = self.value
            return call_next()

    class DropOdd:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            return None if payload["args"][0] % 2 else call_next()

    wurk.client_middleware.add(Stamp, "s1")
    wurk.client_middleware.add(DropOdd)
    assert jobs.echo.perform_async(1) is None
    jid = jobs.echo.perform_async(2)
    assert jid is not None
    [payload] = queue_entries(r)
    assert payload["stamp"] == "s1" and payload["args"] == [2]
    assert seen == [("tests.jobsapp.jobs.echo", "default")] * 2
    assert jobs.echo.perform_bulk([(3,), (4,)])[0] is None


def test_middleware_chain_editing_verbs(wurk: Wurk) -> None:
    order: list[str] = []

    def make(name: str) -> type:
        class M:
            def __call__(self, *args: Any) -> Any:
                order.append(name)
                return args[-1]()

        M.__name__ = name
        return M

    a, b, c, d = make("a"), make("b"), make("c"), make("d")
    chain = wurk.server_middleware
    chain.add(a)
    chain.add(c)
    chain.insert_before(c, b)
    chain.insert_after(c, d)
    chain.prepend(d)  # moves d to the front
    chain.remove(a)
    chain.invoke(lambda: order.append("job"), None, {}, "q")
    assert order == ["d", "b", "c", "job"]
    with pytest.raises(ValueError, match="not in this middleware chain"):
        chain.insert_before(a, b)


def test_calling_a_function_job_runs_it_directly(wurk: Wurk, r: Any) -> None:
    jobs.echo("direct")
    assert r.lrange("seen:echo", 0, -1) == [b'["direct"]']
    assert r.llen("queue:default") == 0


def test_perform_inline_uses_json_round_trip_and_server_middleware(wurk: Wurk, r: Any) -> None:
    calls: list[str] = []

    class Around:
        def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
            calls.append(f"{type(job).__name__}:{payload['jid'] == job.jid}")
            call_next()

    wurk.server_middleware.add(Around)
    assert jobs.PlainJob.perform_inline(1, (2, 3)) == 2
    assert r.lrange("seen:PlainJob", 0, -1) == [b"[1, [2, 3]]"]  # the tuple arrived as a list
    assert calls == ["PlainJob:True"]


def test_job_options_are_validated_when_defined() -> None:
    with pytest.raises(ValueError, match="queue"):

        class BadQueue(Job, abstract=True):
            queue = "no spaces allowed"

    with pytest.raises(ValueError, match="retry must be"):

        class BadRetry(Job):
            wire_name = "BadRetry"
            retry = -1

    with pytest.raises(ValueError, match="module-level"):

        @job
        def nested() -> None: ...

    with pytest.raises(ValueError, match="'jid' cannot be set"):
        jobs.echo.set(jid="x")


def test_wire_name_defaults_to_the_dotted_path() -> None:
    assert jobs.echo.wire_name == "tests.jobsapp.jobs.echo"
    assert jobs.PlainJob.wire_name == "PlainJob"
    from django_wurk.core.registry import registry

    assert registry.resolve("tests.jobsapp.jobs.echo") is jobs.echo.job_class
    assert registry.resolve("os.system") is None


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


def first_mailer() -> None: ...


def second_mailer() -> None: ...


def test_a_decorator_reused_gives_every_function_the_same_options(wurk: Wurk, r: Any) -> None:
    mailer = job(queue="mailers", retry=5, tags=["mail"], vendor_option="kept")
    first, second = mailer(first_mailer), mailer(second_mailer)
    for fn in (first, second):
        assert fn.job_class.set().options == {
            "queue": "mailers",
            "retry": 5,
            "tags": ["mail"],
            "vendor_option": "kept",
        }, fn
        fn.perform_async()
    assert [(e["class"], e["retry"], e["vendor_option"]) for e in reversed(queue_entries(r, "mailers"))] == [
        ("tests.test_client.first_mailer", 5, "kept"),
        ("tests.test_client.second_mailer", 5, "kept"),
    ]


class PausingPusher(BufferedPusher):
    """Holds each drain thread just after it found the buffer empty and let go of the lock.

    That moment is the gap: the thread has decided to stop but is still alive.
    """

    def __init__(self, wurk: Wurk) -> None:
        super().__init__(wurk, RedisPusher(wurk))
        self.emptied = threading.Event()
        self.leave = threading.Event()

    def _drain(self) -> None:
        super()._drain()
        self.emptied.set()
        self.leave.wait(30)


def test_a_push_buffered_while_the_drain_thread_is_leaving_is_still_sent(r: Any, test_config: Config) -> None:
    down = test_config.replace(redis_url="redis://127.0.0.1:1/0", client_buffer=10, redis_socket_timeout=0.5)
    up = test_config.replace(client_buffer=10)
    engine = Wurk()  # its own engine, so Redis can be made unreachable for it alone
    engine.configure(down)
    pusher = PausingPusher(engine)
    try:
        pusher.push([{"class": "Gap", "queue": "gap", "args": [1], "jid": "1" * 24}], None)
        assert pusher.buffered == 1  # Redis is unreachable: kept, and a drain thread started
        engine.configure(up)
        assert pusher.emptied.wait(30)  # sent; its drain thread is on its way out
        engine.configure(down)
        pusher.push([{"class": "Gap", "queue": "gap", "args": [2], "jid": "2" * 24}], None)
        assert pusher.buffered == 1
        engine.configure(up)
        pusher.leave.set()
        wait_for(lambda: r.llen("queue:gap") == 2)
        assert [json.loads(x)["args"] for x in r.lrange("queue:gap", 0, -1)] == [[2], [1]]
    finally:
        pusher.leave.set()
        engine.reset()
