"""Redis going away: clients say so (or buffer), and workers ride out a restart losing nothing."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from django_wurk import ClientBufferFull, Config, EnqueueError, Wurk
from django_wurk.core.worker import Launcher
from tests.conftest import start_valkey, wait_for
from tests.faults.relay import ReplyCutter
from tests.jobsapp import jobs


class RestartableServer:
    """A private Valkey on a fixed port that a test can stop and start again.

    With ``persist`` it keeps an append-only file flushed on every write, as a production
    Redis holding jobs would, so a restart keeps the data.
    """

    def __init__(self, data_dir: Path, persist: bool) -> None:
        self.data_dir = data_dir
        self.config = {"appendonly": "yes", "appendfsync": "always"} if persist else {}
        self.server = start_valkey(data_dir=data_dir, persist=True, **self.config)
        self.port = self.server.port
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server = start_valkey(port=self.port, data_dir=self.data_dir, persist=True, **self.config)


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[Callable[..., RestartableServer]]:
    servers: list[RestartableServer] = []

    def make(persist: bool = False) -> RestartableServer:
        server = RestartableServer(tmp_path / f"valkey-{len(servers)}", persist)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def test_without_a_buffer_enqueue_fails_clearly(wurk: Wurk, test_config: Config) -> None:
    wurk.configure(test_config.replace(redis_url="redis://:s3cret@127.0.0.1:1/0", redis_socket_timeout=0.5))
    with pytest.raises(EnqueueError) as err:
        jobs.echo.perform_async(1)
    message = str(err.value)
    assert "could not push 1 job(s) to Redis at redis://:***@127.0.0.1:1/0" in message
    assert "s3cret" not in message


def test_the_outage_buffer_keeps_pushes_in_order_and_refuses_overflow(
    wurk: Wurk, test_config: Config, private_server: Callable[..., RestartableServer]
) -> None:
    server = private_server()
    wurk.configure(test_config.replace(redis_url=server.url, client_buffer=5, redis_socket_timeout=0.5))
    first = jobs.echo.perform_async("before")
    server.stop()
    buffered = [jobs.echo.perform_async(f"during-{i}") for i in range(4)]
    assert all(buffered)
    with pytest.raises(ClientBufferFull, match="buffer is full"):
        jobs.echo.perform_bulk([("too",), ("many",)])  # 4 + 2 > 5: refused whole
    last = jobs.echo.perform_async("fits")  # the fifth
    server.start()

    def queued() -> list[str]:
        return [json.loads(x)["jid"] for x in reversed(wurk.redis.lrange("queue:default", 0, -1))]

    # The restarted server keeps no data, so "before" went with it; the buffer lost nothing.
    wait_for(lambda: queued() == [*buffered, last], timeout=30)
    assert first not in queued()
    after = jobs.echo.perform_async("after")  # drained: pushes go straight to Redis again
    assert queued()[-1] == after


def test_workers_ride_out_a_redis_restart_and_lose_no_job(
    wurk: Wurk,
    test_config: Config,
    private_server: Callable[..., RestartableServer],
    spawn_worker: Callable[..., Any],
    tmp_path: Path,
) -> None:
    server = private_server(persist=True)
    wurk.configure(test_config.replace(redis_url=server.url))
    jobs.tracked.perform_bulk([(i, 0.05) for i in range(100)])
    worker = spawn_worker("-c", "4", WURK_REDIS_URL=server.url)

    def done() -> set[int]:
        return {json.loads(x) for x in wurk.redis.lrange("seen:tracked", 0, -1)}

    def done_or_retried_now() -> bool:
        # Jobs running at the moment Redis died failed (they record through Redis) and were
        # put in the retry set once it was back; make them due instead of waiting 15 s+.
        for member in wurk.redis.zrange("retry", 0, -1):
            wurk.redis.zadd("retry", {member: 0}, xx=True)
        return done() == set(range(100))

    log_file = tmp_path / "worker-0.log"
    wait_for(lambda: len(done()) >= 20, timeout=30)
    server.stop()
    # Down long enough for the worker to find out (its threads retry with back-off), and
    # then the same port and data come back: the queue and the private lists return.
    wait_for(lambda: "is unreachable" in log_file.read_text(), timeout=30)
    server.start()
    wait_for(done_or_retried_now, timeout=60)
    wait_for(lambda: wurk.redis.scard("processes") == 1, timeout=30)  # heartbeats resumed
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    log = log_file.read_text()
    # Four threads, a poller, a heartbeat and a reaper all saw the outage, and afterwards
    # each connection to the old server failed once more: still one error line.
    assert log.count("is unreachable") == 1, log
    assert log.count("reachable again") == 1, log


@pytest.fixture
def cutter(redis_url: str) -> Iterator[ReplyCutter]:
    upstream = urlsplit(redis_url)
    relay = ReplyCutter(upstream.hostname or "127.0.0.1", upstream.port or 6379)
    yield relay
    relay.close()


def test_a_job_fetched_by_a_reply_the_connection_lost_still_runs_once(
    wurk: Wurk, r: Any, test_config: Config, cutter: ReplyCutter, caplog: pytest.LogCaptureFixture
) -> None:
    """The server moved the job into this process's private list, then the connection died
    before the reply came (Redis stopped right then). The worker is alive, so no reaper takes
    the job back; the worker itself must, once Redis answers again, and run it exactly once."""
    db = urlsplit(test_config.redis_url).path.lstrip("/") or "0"
    wurk.configure(test_config.replace(redis_url=cutter.url(int(db)), concurrency=2))
    worker = Launcher(wurk)
    worker.start()
    try:
        payload = {
            "class": "tests.jobsapp.jobs.tracked",
            "queue": "default",
            "args": [7],
            "jid": "a1b2c3d4e5f6a1b2c3d4e5f6",
            "retry": True,
        }
        cutter.cut_reply_containing(payload["jid"].encode())
        r.lpush("queue:default", json.dumps(payload))  # straight to the server, not through the relay
        wait_for(cutter.cut.is_set)
        wait_for(lambda: r.lrange("seen:tracked", 0, -1) == [b"7"], timeout=15)
    finally:
        worker.stop()
    assert r.lrange("seen:tracked", 0, -1) == [b"7"]  # once, also after the stop's sweep
    assert not [k for k in r.scan_iter(match="queue:sq|*") if r.llen(k)]
    assert r.llen("queue:default") == 0
    [reclaimed] = [m for m in caplog.messages if "its reply was lost" in m]
    assert reclaimed.startswith("pushed 1 job(s) back to their queues")
