"""A real worker (threads, BRPOP, poller, heartbeat) against a real server.

Each test starts a ``Launcher`` on the engine configured by the ``wurk`` fixture (fast
heartbeat and poll intervals) and waits on observable Redis state with a deadline.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.core import wire
from django_wurk.core.metrics import decode_histogram
from django_wurk.core.worker import Launcher
from django_wurk.core.worker.fetch import QueueOrder, UnitOfWork
from django_wurk.core.worker.retry import default_delay
from django_wurk.core.worker.work import WorkSet
from tests.conftest import start_valkey, wait_for
from tests.jobsapp import jobs


@pytest.fixture
def launcher(wurk: Wurk) -> Iterator[Launcher]:
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


def zset(r: Any, key: str) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(m), s) for m, s in r.zrange(key, 0, -1, withscores=True)]


def test_runs_jobs_with_the_exact_arguments_in_fifo_order(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(concurrency=1))
    args = [[i, "ünïcødé ✓", {"nested": [1.5, None, True, {"k": "v"}]}] for i in range(20)]
    for a in args:
        jobs.echo.perform_async(*a)
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: len(seen(wurk.redis, "echo")) == 20)
    finally:
        worker.stop()
    assert seen(wurk.redis, "echo") == args


def test_a_failing_job_lands_in_the_retry_set_with_sidekiqs_fields(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    jid = jobs.always_fails.perform_async(7)
    started = time.time()
    wait_for(lambda: r.zcard("retry") == 1)
    [(payload, score)] = zset(r, "retry")
    assert payload["jid"] == jid and payload["args"] == [7]
    assert payload["error_class"] == "ValueError" and payload["error_message"] == "boom 7"
    assert payload["retry_count"] == 0 and "retried_at" not in payload
    assert started - 1 <= payload["failed_at"] <= time.time()
    # count 0: 0**4 + 15 s, plus Sidekiq 8 jitter rand(10 * 1).
    assert payload["failed_at"] + 15 <= score < payload["failed_at"] + 15 + 10
    frames = wire.decode_backtrace(payload["error_backtrace"])
    assert frames[0].endswith("in `always_fails'") and "jobs.py" in frames[0]
    assert "enqueued_at" in payload and payload["queue"] == "default"


def make_due(r: Any, key: str = "retry") -> None:
    """Pull every entry's score into the past so the poller promotes it now."""
    for member, _ in r.zrange(key, 0, -1, withscores=True):
        r.zadd(key, {member: time.time() - 1}, xx=True)


def test_retry_retry_dead_walk(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    jid = jobs.always_fails.perform_async(1)  # retry=2: three executions, then the dead set
    wait_for(lambda: r.zcard("retry") == 1)
    [(first, _)] = zset(r, "retry")
    history = [first]
    for expected_count in (1,):
        make_due(r)
        # One read per poll: a zcard then a zrange could see the old entry, then nothing (promoted
        # in between), and index an empty list.
        wait_for(lambda c=expected_count: [e["retry_count"] for e, _ in zset(r, "retry")] == [c])
        [(entry, score)] = zset(r, "retry")
        history.append(entry)
        assert entry["failed_at"] == first["failed_at"]  # kept from the first failure
        assert entry["retried_at"] >= first["failed_at"]
        assert entry["created_at"] == first["created_at"] and entry["jid"] == jid
        # count 1: 1 + 15 = 16 s, jitter < 20.
        assert entry["retried_at"] + default_delay(1) <= score < entry["retried_at"] + default_delay(1) + 20
    make_due(r)
    wait_for(lambda: r.zcard("dead") == 1)
    assert r.zcard("retry") == 0
    [(dead, score)] = zset(r, "dead")
    assert dead["jid"] == jid and dead["retry_count"] == 2
    assert dead["failed_at"] == first["failed_at"] and dead["retried_at"] >= history[-1]["retried_at"]
    assert score == pytest.approx(time.time(), abs=5)
    wait_for(lambda: int(r.get("stat:failed") or 0) == 3)


def test_retry_zero_goes_straight_to_the_dead_set(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    jobs.dies_at_once.perform_async(2)
    wait_for(lambda: r.zcard("dead") == 1)
    [(dead, _)] = zset(r, "dead")
    assert (
        dead["retry_count"] == 0
        and dead["error_message"] == "fatal 2"
        and dead["error_class"] == "RuntimeError"
    )
    assert r.zcard("retry") == 0


def test_retry_false_stores_nothing_but_counts_and_tells_death_handlers(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    died: list[tuple[dict[str, Any], BaseException]] = []
    wurk.death_handlers.append(lambda payload, exc: died.append((payload, exc)))
    jobs.fails_without_retry.perform_async(3)
    wait_for(lambda: died)
    assert died[0][0]["args"] == [3] and str(died[0][1]) == "no retry 3"
    wait_for(lambda: int(r.get("stat:failed") or 0) == 1)
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0


def test_retry_in_hook_discard_kill_and_custom_delay(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    died: list[dict[str, Any]] = []
    wurk.death_handlers.append(lambda payload, exc: died.append(payload))
    jobs.Discarding.perform_async(1)
    wait_for(lambda: died)
    assert "discarded_at" in died[0] and r.zcard("retry") == 0 and r.zcard("dead") == 0

    jobs.Killing.perform_async(2)
    wait_for(lambda: r.zcard("dead") == 1)
    assert zset(r, "dead")[0][0]["class"] == "Killing"

    jobs.CustomDelay.perform_async()
    wait_for(lambda: r.zcard("retry") == 1)
    [(entry, score)] = zset(r, "retry")
    assert (
        entry["failed_at"] + 1000 <= score < entry["failed_at"] + 1000 + 10
    )  # jitter is added to custom delays


def test_retries_exhausted_hook_and_dead_false(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    jid = jobs.Exhausting.perform_async()
    wait_for(lambda: seen(r, "exhausted"))
    assert seen(r, "exhausted") == [{"jid": jid, "error": "exhaust"}]
    wait_for(lambda: r.zcard("dead") == 1)

    died: list[dict[str, Any]] = []
    wurk.death_handlers.append(lambda payload, exc: died.append(payload))
    jobs.dies_at_once.set(dead=False).perform_async(9)
    # The Exhausting job's own death may still reach this handler: pick ours by class.
    wait_for(lambda: [p for p in died if p["class"] == "tests.jobsapp.jobs.dies_at_once"])
    [ours] = [p for p in died if p["class"] == "tests.jobsapp.jobs.dies_at_once"]
    assert ours["args"] == [9] and "discarded_at" in ours
    assert r.zcard("dead") == 1  # only the first one


def test_retry_queue_and_retry_for(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    jobs.always_fails.set(retry_queue="slowlane").perform_async(1)
    wait_for(lambda: r.zcard("retry") == 1)
    assert zset(r, "retry")[0][0]["queue"] == "slowlane"
    r.delete("retry")

    # retry_for: exhausted once failed_at + retry_for is past, whatever the count.
    long_ago = time.time() - 3600
    payload = {
        "retry": True,
        "queue": "default",
        "retry_for": 60,
        "args": [5],
        "class": "tests.jobsapp.jobs.always_fails",
        "jid": wire.new_jid(),
        "created_at": long_ago,
        "enqueued_at": time.time(),
        "failed_at": long_ago,
        "retry_count": 0,
    }
    r.lpush("queue:default", wire.dumps(payload))
    wait_for(lambda: r.zcard("dead") == 1)
    assert zset(r, "dead")[0][0]["retry_count"] == 1


def test_unknown_class_fails_and_retries(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    errors: list[tuple[BaseException, dict[str, Any]]] = []
    wurk.error_handlers.append(lambda exc, ctx: errors.append((exc, ctx)))
    r.lpush(
        "queue:default", '{"retry":true,"queue":"default","class":"os.system","args":["rm -rf /"],"jid":"a"}'
    )
    wait_for(lambda: r.zcard("retry") == 1)
    [(entry, _)] = zset(r, "retry")
    assert entry["error_class"] == "UnknownJobError" and "'os.system'" in entry["error_message"]
    assert errors and errors[0][1]["context"] == "Job raised exception" and errors[0][1]["queue"] == "default"


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b'"a string"', "JSON str, not an object"),
        (b'{"args":[1]}', "no 'class'"),
        (b'{"class":"X"}', "no 'args'"),
        (b'{"class":"X","args":"1"}', "'args' is a str"),
        (b'{"class":"X","args":["\xff\xfe"]}', "not valid UTF-8"),
    ],
)
def test_unreadable_payloads_are_buried_with_a_reason_and_the_worker_goes_on(
    wurk: Wurk, r: Any, launcher: Launcher, stored: bytes, reason: str
) -> None:
    r.lpush("queue:default", stored)
    wait_for(lambda: r.zcard("dead") == 1)
    [(envelope, _)] = zset(r, "dead")
    assert envelope["class"] == "django_wurk.InvalidPayload" and envelope["error_class"] == "InvalidPayload"
    assert reason in envelope["error_message"] and envelope["retry"] == 0
    if "payload_base64" in envelope:
        import base64

        assert base64.b64decode(envelope["payload_base64"]) == stored
    else:
        assert envelope["args"] == [stored.decode()]
    jobs.echo.perform_async("still alive")
    wait_for(lambda: seen(r, "echo") == [["still alive"]])


def test_a_ten_megabyte_payload_runs(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    big = "x" * (10 * 1024 * 1024)
    jobs.echo.perform_async(big)
    wait_for(lambda: r.llen("seen:echo") == 1, timeout=20)
    assert len(seen(r, "echo")[0][0]) == len(big)


def test_scheduled_jobs_run_when_due(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    jid = jobs.echo.perform_in(0.5, "later")
    assert r.zcard("schedule") == 1
    wait_for(lambda: seen(r, "echo") == [["later"]])
    assert r.zcard("schedule") == 0
    assert jid


def test_promotion_runs_client_middleware_and_buries_unreadable_entries(
    wurk: Wurk, r: Any, launcher: Launcher
) -> None:
    class Mark:
        def __call__(self, job_class: str, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
            payload["promoted_by_middleware"] = True
            return call_next()

    wurk.client_middleware.add(Mark)
    r.zadd("schedule", {b"{broken": time.time() - 5})
    payload = {
        "retry": True,
        "queue": "default",
        "args": ["p"],
        "class": "tests.jobsapp.jobs.echo",
        "jid": "j1",
    }
    r.zadd("schedule", {wire.dumps(payload): time.time() - 5})
    wait_for(lambda: seen(r, "echo") == [["p"]])
    wait_for(lambda: r.zcard("dead") == 1)
    assert zset(r, "dead")[0][0]["args"] == ["{broken"]
    assert r.zcard("schedule") == 0


def test_two_pollers_never_push_one_entry_twice(wurk: Wurk, r: Any) -> None:
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.scheduler import Poller

    for i in range(300):
        payload = {"retry": True, "queue": "race", "args": [i], "class": "X", "jid": f"{i:024x}"}
        r.zadd("schedule", {wire.dumps(payload): time.time() - 10})
    pollers = [Poller(wurk, Outage(wurk.config.redis_url)) for _ in range(4)]
    counts: list[int] = []
    threads = [threading.Thread(target=lambda p=p: counts.append(p.enqueue_due())) for p in pollers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == 300
    jids = [json.loads(x)["jid"] for x in r.lrange("queue:race", 0, -1)]
    assert len(jids) == 300 and len(set(jids)) == 300


def test_heartbeat_writes_sidekiqs_process_keys(wurk: Wurk, r: Any, launcher: Launcher) -> None:
    identity = launcher.identity
    host, pid, nonce = identity.split(":")
    assert host == "testhost" and int(pid) > 0 and len(nonce) == 12
    assert r.sismember("processes", identity)
    fields = {k.decode(): v.decode() for k, v in r.hgetall(identity).items()}
    assert set(fields) >= {"info", "concurrency", "busy", "beat", "rtt_us", "quiet", "rss"}
    info = json.loads(fields["info"])
    assert info["identity"] == identity and info["hostname"] == "testhost" and info["pid"] == int(pid)
    assert info["concurrency"] == 3 and fields["concurrency"] == "3"
    assert info["queues"] == ["default"] and info["tag"] == "" and info["labels"] == []
    assert isinstance(info["started_at"], float)
    assert fields["quiet"] == "false" and int(fields["rss"]) > 0
    assert float(fields["beat"]) == pytest.approx(time.time(), abs=5)
    assert 0 < r.ttl(identity) <= 60

    jid = jobs.blocks_until_released.perform_async("busy")
    wait_for(lambda: r.hget(identity, "busy") == b"1")
    work = r.hgetall(f"{identity}:work")
    [(_tid, value)] = work.items()
    entry = json.loads(value)
    assert entry["queue"] == "default" and isinstance(entry["run_at"], int)
    assert json.loads(entry["payload"])["jid"] == jid  # a JSON string inside JSON, as Sidekiq writes it
    assert 0 < r.ttl(f"{identity}:work") <= 60
    jobs.release.set()
    wait_for(lambda: r.hget(identity, "busy") == b"0")
    assert not r.exists(f"{identity}:work")


def test_legacy_workers_key_for_old_web_uis(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(legacy_workers_key=True))
    worker = Launcher(wurk)
    worker.start()
    try:
        jobs.blocks_until_released.perform_async("legacy")
        wait_for(lambda: wurk.redis.hlen(f"{worker.identity}:workers") == 1)
        assert wurk.redis.hgetall(f"{worker.identity}:workers") == wurk.redis.hgetall(
            f"{worker.identity}:work"
        )
    finally:
        jobs.release.set()
        worker.stop()
        jobs.release.clear()


def test_stop_leaves_the_process_set_and_flushes_stats(wurk: Wurk, r: Any) -> None:
    worker = Launcher(wurk)
    worker.start()
    for i in range(5):
        jobs.echo.perform_async(i)
    jobs.always_fails.set(retry=False).perform_async(0)
    wait_for(lambda: r.llen("seen:echo") == 5)
    worker.stop()
    assert not r.sismember("processes", worker.identity)
    assert not r.exists(f"{worker.identity}:work")
    assert r.exists(worker.identity)  # the hash is left to expire, as Sidekiq leaves it
    assert int(r.get("stat:processed")) == 6 and int(r.get("stat:failed")) == 1
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert int(r.get(f"stat:processed:{day}")) == 6
    assert r.ttl(f"stat:processed:{day}") > 157_000_000


def test_a_stopped_worker_gives_its_connections_back_to_the_pool(wurk: Wurk, r: Any) -> None:
    """Workers started and stopped in one process (tests, embedding) must not drain the pool.

    Each processor thread holds a pooled connection while it runs; before the fix a stopped
    worker kept them, so the third start on a pool of concurrency + 5 raised "Too many
    connections".
    """
    pool = r.connection_pool
    for round_ in range(4):
        worker = Launcher(wurk)
        worker.start()
        jobs.echo.perform_async(round_)
        wait_for(lambda n=round_ + 1: r.llen("seen:echo") == n)
        worker.stop()
        in_use = pool.max_connections - pool.pool.qsize()  # the blocking pool's free slots
        assert in_use == 0, f"round {round_}: {in_use} connection(s) still held"


def test_metrics_in_sidekiq_8_format(wurk: Wurk, r: Any) -> None:
    worker = Launcher(wurk)
    worker.start()
    for i in range(3):
        jobs.echo.perform_async(i)
    jobs.dies_at_once.perform_async(1)
    wait_for(lambda: r.llen("seen:echo") == 3 and r.zcard("dead") == 1)
    worker.stop()
    minute_keys = [k.decode() for k in r.keys("j|*")]
    minutely = [k for k in minute_keys if k.count(":") == 1 and len(k.rsplit(":", 1)[1]) == 2]
    assert minutely, minute_keys
    data = {k.decode(): int(v) for k, v in r.hgetall(minutely[0]).items()}
    assert data["tests.jobsapp.jobs.echo|p"] == 3
    assert data["tests.jobsapp.jobs.dies_at_once|p"] == 1 and data["tests.jobsapp.jobs.dies_at_once|f"] == 1
    assert 0 < r.ttl(minutely[0]) <= 28_800
    [histogram] = r.keys("h|tests.jobsapp.jobs.echo-*")
    counts = decode_histogram(r.get(histogram))
    # Three runs recorded (in the < 20 ms bucket on a quiet machine, but a loaded one may
    # take longer); the failure records no time.
    assert sum(counts) == 3 and len(counts) == 26
    assert r.execute_command("BITFIELD_RO", histogram, "GET", "u16", "#0") == [counts[0]]


def test_remote_signals_quiet_dump_and_stop(wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture) -> None:
    worker = Launcher(wurk)
    runner = threading.Thread(target=worker.run, kwargs={"handle_os_signals": False})
    runner.start()
    try:
        wait_for(lambda: r.sismember("processes", worker.identity))
        with caplog.at_level(logging.WARNING, logger="django_wurk.launcher"):
            r.lpush(f"{worker.identity}-signals", "TTIN")
            # Match the closing record itself: the stacks quote this test's source, which contains the words too.
            wait_for(lambda: any(rec.getMessage().startswith("thread dump done") for rec in caplog.records))
        assert "thread wurk-processor-0" in caplog.text

        r.lpush(f"{worker.identity}-signals", "TSTP")
        wait_for(lambda: r.hget(worker.identity, "quiet") == b"true")
        wait_for(lambda: all(not p.thread.is_alive() for p in worker.manager.processors))
        jobs.echo.perform_async("not fetched while quiet")
        r.lpush(f"{worker.identity}-signals", "TERM")
        runner.join(10)
        assert not runner.is_alive()
        assert r.llen("queue:default") == 1 and r.llen("seen:echo") == 0
        assert not r.sismember("processes", worker.identity)
    finally:
        worker.signal("TERM")
        runner.join(10)


def test_shutdown_pushes_unfinished_jobs_back_once(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(timeout=0.3))
    worker = Launcher(wurk)
    worker.start()
    jid = jobs.sleepy.perform_async(30)
    wait_for(lambda: seen(wurk.redis, "sleepy-start"))
    worker.stop()
    back = [json.loads(x) for x in wurk.redis.lrange("queue:default", 0, -1)]
    assert [p["jid"] for p in back] == [jid]
    assert seen(wurk.redis, "sleepy-done") == []
    assert wurk.redis.zcard("retry") == 0  # an interrupted job is not a failure


def test_shutdown_waits_for_jobs_that_finish_within_the_timeout(wurk: Wurk, r: Any) -> None:
    worker = Launcher(wurk)
    worker.start()
    jobs.sleepy.perform_async(0.5)
    wait_for(lambda: seen(r, "sleepy-start"))
    worker.stop()
    assert seen(r, "sleepy-done") == [0.5]
    assert r.llen("queue:default") == 0


def test_the_stop_interrupts_and_pushes_back_only_jobs_whose_outcome_is_not_recorded() -> None:
    """The running-jobs set the heartbeat reports and the stop acts on, with real threads."""
    work = WorkSet()
    running = threading.Barrier(3)
    release = threading.Event()

    def run(tid: str, record_outcome: bool) -> None:
        current = work.start(tid, UnitOfWork("default", tid.encode()))
        try:
            if record_outcome:
                work.finish(current)
            running.wait()
            release.wait()
        finally:
            work.end(tid)

    threads = {tid: threading.Thread(target=run, args=(tid, tid == "done")) for tid in ("done", "busy")}
    for t in threads.values():
        t.start()
    running.wait()
    assert sorted(work.snapshot()) == ["busy", "done"]  # both still reported until they end
    interrupted: list[threading.Thread] = []
    unfinished = work.interrupt_unfinished(interrupted.append)
    assert interrupted == [threads["busy"]]
    assert work.still_unfinished(unfinished) == [UnitOfWork("default", b"busy")]
    release.set()
    for t in threads.values():
        t.join(5)
    assert work.snapshot() == {}


def test_strict_queue_order(wurk: Wurk, r: Any, test_config: Config) -> None:
    from django_wurk.core.config import QueueSpec

    wurk.configure(test_config.replace(concurrency=1, queues=(QueueSpec("critical"), QueueSpec("default"))))
    for i in range(3):
        jobs.echo.perform_async(f"d{i}")
    for i in range(3):
        jobs.echo.set(queue="critical").perform_async(f"c{i}")
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: wurk.redis.llen("seen:echo") == 6)
    finally:
        worker.stop()
    assert [a[0] for a in seen(wurk.redis, "echo")] == ["c0", "c1", "c2", "d0", "d1", "d2"]


@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_a_paused_queue_is_skipped_until_unpaused(
    wurk: Wurk, r: Any, test_config: Config, fetch: str
) -> None:
    """Sidekiq Pro's ``paused`` set: jobs wait in a paused queue, other queues run, unpause resumes."""
    from django_wurk.core import api
    from django_wurk.core.config import QueueSpec

    # "low" first in strict order: a worker that ignored the pause would run its job first.
    wurk.configure(test_config.replace(fetch=fetch, queues=(QueueSpec("low"), QueueSpec("default"))))
    low = api.Queue("low", wurk)
    assert low.pause() is True and low.pause() is False and low.paused()
    held = jobs.echo.set(queue="low").perform_async("held")
    jobs.echo.perform_async("runs")
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: seen(r, "echo") == [["runs"]])
        jobs.echo.perform_async("runs too")
        wait_for(lambda: len(seen(r, "echo")) == 2)
        assert [json.loads(x)["jid"] for x in r.lrange("queue:low", 0, -1)] == [held]
        assert low.unpause() is True and not low.paused()
        wait_for(lambda: len(seen(r, "echo")) == 3)  # within PAUSED_REFRESH
    finally:
        worker.stop()
    assert seen(r, "echo")[-1] == ["held"] and r.llen("queue:low") == 0


@pytest.mark.parametrize("fetch", ["reliable", "basic"])
def test_with_every_queue_paused_a_fetch_waits_and_still_acknowledges(
    wurk: Wurk, r: Any, test_config: Config, fetch: str
) -> None:
    from django_wurk.core.worker.fetch import fetch_for

    config = test_config.replace(fetch=fetch, fetch_timeout=0.2)
    fetcher = fetch_for(config, wurk.redis, wurk.scripts, "testhost:1:paused")
    jobs.echo.perform_async("first")
    unit = fetcher.fetch()
    assert unit is not None
    jobs.echo.perform_async("waits")
    r.sadd("paused", "default")
    fetcher.paused.refresh = 0.0  # reread the paused set on every fetch
    started = time.monotonic()
    assert fetcher.fetch(unit) is None
    # It waited out the fetch timeout (no busy loop) and left the queue alone...
    assert time.monotonic() - started >= 0.2
    assert [json.loads(x)["args"] for x in r.lrange("queue:default", 0, -1)] == [["waits"]]
    # ...and the finished job it was handed is acknowledged (reliable fetch's private list is empty).
    assert r.llen("queue:sq|testhost:1:paused|default") == 0
    fetcher.release()


def test_weighted_fetch_order_is_random_in_proportion(test_config: Config) -> None:
    from django_wurk.core.config import QueueSpec

    config = test_config.replace(queues=(QueueSpec("a", 3), QueueSpec("b", 1)))
    order = QueueOrder(config)
    firsts = [order()[0] for _ in range(4000)]
    share = firsts.count("a") / len(firsts)
    assert 0.7 < share < 0.8  # 3 of 4 expected
    assert all(sorted(order()) == ["a", "b"] for _ in range(50))


def test_weighted_fetch_order_has_the_shuffles_distribution_over_whole_orders(test_config: Config) -> None:
    """The order is drawn directly, in time with the number of queues, and must give every
    whole order the probability Sidekiq's shuffle of a list with each queue ``weight`` times,
    deduplicated, gives it: a, b, c weighted 3, 2, 1 come as a b c with probability
    3/6 * 2/3, as c b a with 1/6 * 2/5, and so on."""
    from django_wurk.core.config import QueueSpec

    expected = {
        ("a", "b", "c"): 3 / 6 * 2 / 3,
        ("a", "c", "b"): 3 / 6 * 1 / 3,
        ("b", "a", "c"): 2 / 6 * 3 / 4,
        ("b", "c", "a"): 2 / 6 * 1 / 4,
        ("c", "a", "b"): 1 / 6 * 3 / 5,
        ("c", "b", "a"): 1 / 6 * 2 / 5,
    }
    order = QueueOrder(test_config.replace(queues=(QueueSpec("a", 3), QueueSpec("b", 2), QueueSpec("c", 1))))
    state = random.getstate()
    random.seed(16)
    try:
        draws = [tuple(order()) for _ in range(12_000)]
    finally:
        random.setstate(state)
    for whole, p in expected.items():
        assert abs(draws.count(whole) / len(draws) - p) < 0.02, whole
    # A queue named twice counts with both weights, as it appears that many times in the shuffle.
    twice = QueueOrder(test_config.replace(queues=(QueueSpec("a", 1), QueueSpec("b", 1), QueueSpec("a", 2))))
    firsts = [twice()[0] for _ in range(4000)]
    assert 0.7 < firsts.count("a") / len(firsts) < 0.8 and all(
        sorted(twice()) == ["a", "b"] for _ in range(50)
    )


def test_a_redis_outage_is_logged_once_and_the_worker_recovers(
    wurk: Wurk, test_config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_valkey()
    port = server.port
    wurk.configure(test_config.replace(redis_url=f"redis://127.0.0.1:{port}/0"))
    worker = Launcher(wurk)
    worker.start()
    try:
        with caplog.at_level(logging.INFO, logger="django_wurk"):
            server.stop()
            wait_for(lambda: "is unreachable" in caplog.text, timeout=15)
            server = start_valkey(port=port)
            wait_for(lambda: "reachable again" in caplog.text, timeout=15)
            jobs.echo.perform_async("after the outage")
            wait_for(lambda: seen(wurk.redis, "echo") == [["after the outage"]], timeout=15)
            wait_for(
                lambda: wurk.redis.sismember("processes", worker.identity), timeout=15
            )  # heartbeats resumed
        # Many threads hit the outage; it is reported once.
        assert caplog.text.count("is unreachable") == 1
    finally:
        worker.stop()
        server.stop()
