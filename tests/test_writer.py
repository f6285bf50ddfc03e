"""One routing decision per push, one writer for every route, one backlog for every retry.

A push is routed once (``Client.route``: captured by a batch block, a testing mode, the
transaction's commit or outbox, or now), and whatever route it takes, the job reaches Redis
through ``core/writer.py``: its push gates decide there, on every route. What cannot be
written yet waits in a ``core.backlog.Backlog``, which retries in order with back-off,
starts empty in a forked child and gives what waits a bounded last try at exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from redis.exceptions import ConnectionError as RedisConnectionError

from django_wurk import Batch, BatchStatus, Config, Wurk
from django_wurk.conf import Settings
from django_wurk.core.backlog import Backlog, BacklogFull, Fate
from django_wurk.core.client import Client
from django_wurk.core.wire import Payload
from django_wurk.models import OutboxEntry
from tests.conftest import wait_for
from tests.jobsapp import jobs

ROOT = Path(__file__).resolve().parents[1]
DEAD_REDIS = "redis://127.0.0.1:1/0"


def queued_args(r: Any, queue: str = "default") -> list[Any]:
    return [json.loads(x)["args"][0] for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


# One routing decision ------------------------------------------------------------------------


def test_each_push_is_routed_once(wurk: Wurk, r: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    decisions: list[Any] = []
    route = Client.route

    def counted(self: Client, delivery: Any) -> Any:
        decisions.append(dict(delivery))
        return route(self, delivery)

    monkeypatch.setattr(Client, "route", counted)
    jobs.echo.perform_async(1)
    assert len(decisions) == 1
    jobs.echo.perform_in(60, 2)
    assert len(decisions) == 2
    # A bulk push is one decision, however many pipelines it takes.
    jobs.echo.perform_bulk([(i,) for i in range(5)], batch_size=2)
    assert len(decisions) == 3
    jobs.echo.set(on_commit=False).perform_async(3)
    assert decisions[-1] == {"on_commit": False} and len(decisions) == 4
    assert r.llen("queue:default") == 7 and r.zcard("schedule") == 1


# Every route through the writer and its gates --------------------------------------------------


class Refuser:
    """A push gate that refuses the jobs whose first argument is ``"refused"``, and keeps
    what it was asked (it only runs in the writer)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, payloads: list[Payload], at: float | None) -> list[Payload]:
        self.seen += [p["args"][0] for p in payloads]
        return [p for p in payloads if p["args"][0] != "refused"]


@pytest.fixture
def refuser(wurk: Wurk) -> Refuser:
    gate = Refuser()
    wurk.push_gates.append(gate)  # the wurk fixture puts the gates back afterwards
    return gate


def test_now_the_writer_runs_the_gates(wurk: Wurk, r: Any, refuser: Refuser) -> None:
    assert jobs.echo.perform_async("refused") is None  # refused at once: the caller is told
    assert jobs.echo.perform_async("kept") is not None
    assert refuser.seen == ["refused", "kept"] and queued_args(r) == ["kept"]


@pytest.mark.django_db(transaction=True)
def test_at_the_commit_the_writer_runs_the_gates(wurk: Wurk, r: Any, refuser: Refuser) -> None:
    with transaction.atomic():
        jobs.echo.perform_async("refused")
        jobs.echo.perform_async("kept")
        assert refuser.seen == []  # nothing is decided before the write
    assert refuser.seen == ["refused", "kept"] and queued_args(r) == ["kept"]


@pytest.mark.django_db(transaction=True)
def test_from_the_outbox_the_writer_runs_the_gates(
    wurk: Wurk, r: Any, refuser: Refuser, use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(enqueue="outbox")
    with transaction.atomic():
        jobs.echo.perform_async("refused")
        jobs.echo.perform_async("kept")
        assert OutboxEntry.objects.count() == 2 and refuser.seen == []
    assert refuser.seen == ["refused", "kept"] and queued_args(r) == ["kept"]
    assert OutboxEntry.objects.count() == 0  # a refused row is done with, not left for the relay


def test_a_batch_block_is_written_through_the_gates(wurk: Wurk, r: Any, refuser: Refuser) -> None:
    batch = Batch()
    with batch.jobs():
        jobs.echo.perform_async("refused")
        jobs.echo.perform_async("kept")
        assert refuser.seen == []  # captured by the block, written when it ends
    assert refuser.seen == ["refused", "kept"] and queued_args(r) == ["kept"]
    assert BatchStatus(batch.bid).total == 1


def test_the_outage_buffer_replays_through_the_gates(
    wurk: Wurk, r: Any, refuser: Refuser, test_config: Config
) -> None:
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, client_buffer=10, redis_socket_timeout=0.5))
    assert jobs.echo.perform_async("kept") is not None  # let through, then Redis failed: buffered
    # Behind a buffered push a push joins the buffer untried: decided when it is replayed.
    assert jobs.echo.perform_async("refused") is not None
    assert wurk.writer.buffered == 2 and refuser.seen == ["kept"]
    wurk.configure(test_config.replace(client_buffer=10))
    wait_for(lambda: wurk.writer.buffered == 0, timeout=30)
    assert queued_args(wurk.redis) == ["kept"]
    assert refuser.seen[-1] == "refused" and refuser.seen.count("refused") == 1


def test_only_the_writer_reads_the_push_gates() -> None:
    """The gates are run in one place: a new route cannot forget them."""
    readers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "django_wurk").rglob("*.py")
        if ".push_gates" in path.read_text() and path.name != "engine.py"
    )
    assert readers == ["django_wurk/core/writer.py"]


def test_the_testing_modes_declare_they_keep_no_redis_state(wurk: Wurk) -> None:
    from django_wurk import testing
    from django_wurk.core.client import writes_to_redis

    assert wurk.pusher is wurk.writer and writes_to_redis(wurk)
    with testing.fake():
        assert not writes_to_redis(wurk)
    with testing.inline():
        assert not writes_to_redis(wurk)


# The backlog ----------------------------------------------------------------------------------


class Target:
    """What a backlog writes to in these tests: fails with an outage while ``down``."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.written: list[Any] = []
        self.lost: list[tuple[Any, str, Fate]] = []
        self.retried: list[tuple[Any, int]] = []

    def write(self, item: Any) -> None:
        if item == "poison":
            raise ValueError("never writable")
        if self.down.is_set():
            raise RedisConnectionError("down")
        self.written.append(item)

    def backlog(self, **options: Any) -> Backlog[Any]:
        return Backlog(
            "test",
            self.write,
            lambda item, error, fate: self.lost.append((item, str(error), fate)),
            first_delay=0.01,
            max_delay=0.05,
            on_written=lambda item, attempt: self.retried.append((item, attempt)),
            **options,
        )


def test_the_backlog_writes_in_order_once_the_outage_ends() -> None:
    target = Target()
    target.down.set()
    backlog = target.backlog()
    for i in range(5):
        backlog.submit(i, RedisConnectionError("down"))
    assert backlog.busy() and backlog.size == 5
    target.down.clear()
    wait_for(lambda: not backlog.busy())
    assert target.written == [0, 1, 2, 3, 4] and target.lost == []
    assert target.retried[0][0] == 0 and target.retried[0][1] >= 1


def test_an_error_that_is_no_outage_is_given_up_at_once_and_the_rest_go_on() -> None:
    target = Target()
    backlog = target.backlog()
    backlog.submit("poison")
    backlog.submit("after")
    wait_for(lambda: not backlog.busy())
    assert target.lost == [("poison", "never writable", "failed")] and target.written == ["after"]


def test_the_attempts_run_out_with_the_last_error() -> None:
    target = Target()
    target.down.set()
    backlog = target.backlog(attempts=lambda: 3)
    backlog.submit("doomed", RedisConnectionError("first"))
    wait_for(lambda: target.lost)
    assert target.lost == [("doomed", "down", "exhausted")]
    backlog.submit("none allowed", RedisConnectionError("its own error"))
    backlog.attempts = lambda: 0
    wait_for(lambda: len(target.lost) == 2)
    assert target.lost[1] in {
        ("none allowed", "its own error", "exhausted"),
        ("none allowed", "down", "exhausted"),  # the thread had started its retries already
    }


def test_a_full_backlog_refuses_and_keeps_what_it_has() -> None:
    target = Target()
    target.down.set()
    backlog = target.backlog(limit=lambda: 3, size=len)
    backlog.submit("ab")
    with pytest.raises(BacklogFull):
        backlog.submit("cd")
    backlog.submit("e")
    assert backlog.size == 3
    target.down.clear()
    wait_for(lambda: not backlog.busy())
    assert target.written == ["ab", "e"]


FORKED = """
import os, sys, time
from redis.exceptions import ConnectionError
from django_wurk.core.backlog import Backlog

written = []
def write(item):
    if item == "parent's":
        raise ConnectionError("down for the parent")
    written.append(item)

backlog = Backlog("forked", write, lambda item, error, fate: None, first_delay=0.01, max_delay=0.05)
backlog.submit("parent's", ConnectionError("down"))
assert backlog.busy()
pid = os.fork()
if pid == 0:
    # The child: nothing of its parent's to write, no thread of its parent's; its own work goes.
    ok = not backlog.busy() and backlog.size == 0 and backlog._thread is None
    backlog.submit("child's")
    deadline = time.monotonic() + 10
    while backlog.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    os._exit(0 if ok and written == ["child's"] else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), "parent busy", backlog.busy(), flush=True)
"""


def test_a_forked_child_starts_with_an_empty_backlog() -> None:
    proc = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "child 0 parent busy True" in proc.stdout, proc.stdout + proc.stderr


AT_EXIT = """
import atexit, os, sys, time
from redis.exceptions import ConnectionError
from django_wurk.core.backlog import Backlog

mode = sys.argv[1]
up = False
def write(item):
    if mode == "hangs":
        time.sleep(60)  # a Redis that accepts the connection and never answers
    if not up:
        raise ConnectionError("down")
    print("written", item, flush=True)

def lost(item, error, fate):
    print("lost", item, fate, error, flush=True)

backlog = Backlog("exit", write, lost, exit_within=lambda: 1.0)
for item in ("a", "b"):
    backlog.submit(item, ConnectionError("down at first"))

def redis_is_back():
    global up
    up = mode == "back"
atexit.register(lambda: print("exited", time.monotonic(), flush=True))  # runs last
atexit.register(redis_is_back)  # runs before the backlog's flush (registered on import)
print("exiting", time.monotonic(), flush=True)
"""


def run_exit(mode: str) -> tuple[list[str], float]:
    proc = subprocess.run(
        [sys.executable, "-c", AT_EXIT, mode], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    stamps = {line.split()[0]: float(line.split()[1]) for line in lines if line.startswith("exit")}
    return [line for line in lines if not line.startswith("exit")], stamps["exited"] - stamps["exiting"]


def test_at_exit_what_waits_gets_one_last_try() -> None:
    lines, took = run_exit("back")
    assert lines == ["written a", "written b"] and took < 5


def test_at_exit_what_cannot_be_written_is_reported_lost() -> None:
    lines, took = run_exit("down")
    assert lines == ["lost a exiting down", "lost b exiting down"] and took < 5


def test_the_exit_waits_a_bounded_time_for_a_write_that_hangs() -> None:
    lines, took = run_exit("hangs")
    # "a" was being written when the time ran out (it may yet land); "b" was never tried.
    assert lines == ["lost a under_way down at first", "lost b exiting down at first"]
    assert took < 5


BUFFERED_AT_EXIT = """
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
from django_wurk import Config, Wurk
engine = Wurk()
engine.configure(Config(redis_url="redis://127.0.0.1:1/0", client_buffer=5, redis_socket_timeout=0.5))
engine.client.push({"class": "Late", "queue": "default", "args": [1]})
print("buffered", engine.writer.buffered, flush=True)
"""


def test_the_outage_buffer_says_what_it_loses_at_exit() -> None:
    """Before the backlog, a process exiting with pushes buffered lost them without a word."""
    proc = subprocess.run(
        [sys.executable, "-c", BUFFERED_AT_EXIT], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "buffered 1" in proc.stdout
    [error] = [
        line for line in proc.stderr.splitlines() if line.startswith("ERROR django_wurk.client 1 buffered")
    ]
    assert "never reached Redis and are lost" in error and "'Late'" in error
