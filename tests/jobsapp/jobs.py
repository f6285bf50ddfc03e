"""Jobs the test suite runs in real workers. Each records what it saw in Redis (``seen:<name>``)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django_wurk import Job, job, wurk
from django_wurk.iterable import IterableJob, list_enumerator

release = threading.Event()


def record(name: str, value: Any) -> None:
    wurk.redis.rpush(f"seen:{name}", json.dumps(value))


@job(queue="default")
def echo(*args: Any) -> None:
    record("echo", list(args))


@job(queue="critical", retry=5, backtrace=3, tags=["alpha"])
def critical(x: Any) -> None:
    record("critical", x)


@job(retry=2, backtrace=True)
def always_fails(n: int) -> None:
    raise ValueError(f"boom {n}")


@job(retry=0)
def dies_at_once(n: int) -> None:
    raise RuntimeError(f"fatal {n}")


@job(retry=False)
def fails_without_retry(n: int) -> None:
    raise RuntimeError(f"no retry {n}")


@job
def sleepy(seconds: float) -> None:
    record("sleepy-start", seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.02)
    record("sleepy-done", seconds)


@job
def blocks_until_released(tag: str) -> None:
    record("blocked", tag)
    release.wait(30)


class Discarding(Job):
    wire_name = "Discarding"
    retry = 3

    def perform(self, n: int) -> None:
        raise KeyError(n)

    def retry_in(self, count: int, exc: BaseException) -> str:
        return "discard"


class Killing(Job):
    wire_name = "Killing"

    def perform(self, n: int) -> None:
        raise KeyError(n)

    def retry_in(self, count: int, exc: BaseException) -> str:
        return "kill"


class CustomDelay(Job):
    wire_name = "CustomDelay"
    retry = 5

    def perform(self) -> None:
        raise LookupError("later")

    def retry_in(self, count: int, exc: BaseException) -> int:
        return 1000


class Exhausting(Job):
    wire_name = "Exhausting"
    retry = 0

    def perform(self) -> None:
        raise LookupError("exhaust")

    def retries_exhausted(self, payload: dict[str, Any], exc: BaseException) -> None:
        record("exhausted", {"jid": payload["jid"], "error": str(exc)})


class PlainJob(Job):
    wire_name = "PlainJob"

    def perform(self, *args: Any) -> Any:
        record("PlainJob", list(args))
        return len(args)


@job
def report_server_middleware() -> None:
    record("server-middleware", [type(m).__name__ for m in wurk.server_middleware])


@job(retry=False)
def kills_its_worker() -> None:
    """Takes the whole worker process down, as a segfault or the OOM killer would."""
    import os
    import signal

    record("kills_its_worker", os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


@job
def tracked(n: int, seconds: float = 0.0) -> None:
    """Records each run by jid, so a test can prove every job ran, and how often."""
    from django_wurk.core.api import JobRecord  # noqa: F401  (keeps the import graph honest in workers)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
    wurk.redis.rpush("seen:tracked", json.dumps(n))


class SoakJob(Job):
    """Fails about 1 % of first attempts; records every success by jid."""

    wire_name = "SoakJob"
    retry = 1

    def perform(self, n: int) -> None:
        if "retry_count" not in self.payload and int(self.jid[:6], 16) % 100 == 0:
            raise RuntimeError(f"soak failure for job {n}")
        wurk.redis.sadd("soak:done", self.jid)


#: The event loop of every async job run in this process, in run order (in-process workers).
async_loops: list[asyncio.AbstractEventLoop] = []


@job
async def async_echo(*args: Any) -> str:
    """An ``async def`` job: it records only after an await, so a run that never awaited shows."""
    await asyncio.sleep(0)
    async_loops.append(asyncio.get_running_loop())
    record("async_echo", {"args": list(args), "thread": threading.current_thread().name})
    return "done"


@job(retry=2)
async def async_fails(n: int) -> None:
    await asyncio.sleep(0)
    raise ValueError(f"async boom {n}")


class AsyncPerform(Job):
    """A job class whose ``perform`` is ``async def``."""

    wire_name = "AsyncPerform"

    async def perform(self, n: int) -> None:
        await asyncio.sleep(0)
        record("AsyncPerform", {"n": n, "jid": self.jid})


async def _record_later(name: str, value: Any) -> None:
    await asyncio.sleep(0)
    record(name, value)


@job
def returns_a_coroutine(n: int) -> Any:
    """A plain ``def`` that hands back a coroutine: the worker runs it, as if it were ``async def``."""
    return _record_later("returns_a_coroutine", n)


@job
def leaves_a_thread(seconds: float) -> None:
    """Starts a non-daemon thread that outlives the job (and would keep a process from exiting)."""
    threading.Thread(target=time.sleep, args=(seconds,), name="left-behind-by-a-job", daemon=False).start()
    record("leaves_a_thread", seconds)


@job
async def async_sleeps(seconds: float) -> None:
    record("async_sleeps-start", seconds)
    try:
        await asyncio.sleep(seconds)
    finally:
        record("async_sleeps-ended", seconds)


class PeriodicTick(Job):
    """Fired by ``WURK["PERIODIC"]`` in the real-process tests: records its jid once per run."""

    queue = "periodic"

    def perform(self, label: str) -> None:
        record("periodic", {"label": label, "jid": self.jid})


@job(timeout=1, retry=3)
def hang_in_recv(marker: str, port: int) -> None:
    """Blocks in C (``recv`` on a socket whose peer never sends) past its timeout."""
    import socket

    wurk.redis.rpush("timeouts:started", marker)
    wurk.redis.set("timeouts:hang-pid", os.getpid())
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.recv(1)
    wurk.redis.rpush("timeouts:returned", marker)


@job(retry=3)
def slow_mark(marker: str, seconds: float) -> None:
    """Runs ``seconds``, then records that it finished (a job killed on the way never does).
    Each start is recorded with the process it ran in."""
    wurk.redis.rpush("timeouts:slow-started", f"{marker}@{os.getpid()}")
    time.sleep(seconds)
    wurk.redis.rpush("timeouts:slow-done", marker)


@job
def logs_to_file(path: str, n: int) -> None:
    """Appends ``n`` to a file: a record of the run that no Redis failover can lose."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{n}\n")


@job
def overlapping(group: str, seconds: float) -> None:
    """Counts how many jobs of ``group`` run at once: ``seen:overlap-<group>`` gets each start's count."""
    running = f"overlap-running:{group}"
    record(f"overlap-{group}", int(wurk.redis.incr(running)))
    try:
        time.sleep(seconds)
    finally:
        wurk.redis.decr(running)


class Walker(IterableJob):
    """Walks ``range(n)``, recording each item in ``seen:walker`` and the end in ``seen:walker-done``."""

    checkpoint_interval = 0.2

    def build_enumerator(self, n: int, delay: float, *, cursor: Any) -> Iterator[tuple[int, int]]:
        for i in range(cursor or 0, n):
            yield i, i + 1

    def each_iteration(self, item: int, n: int, delay: float) -> None:
        record("walker", item)
        time.sleep(delay)

    def on_complete(self, n: int, delay: float) -> None:
        record("walker-done", n)


class Hooked(IterableJob):
    """Walks ``range(n)`` (``list_enumerator``), recording in ``seen:hooked`` each item and
    each hook: ``"start"``, ``"resume"``, ``["in", item]`` and ``["out", item]`` around an item,
    ``"stop"``, ``"cancel"``, ``"complete"``. ``on_resume`` records ``["resume", echoes]``, the
    number of ``echo`` jobs done by then (the max_iteration_runtime test reads it)."""

    checkpoint_interval = 3600.0

    def build_enumerator(self, n: int, delay: float, *, cursor: Any) -> Iterator[tuple[int, int]]:
        return list_enumerator(list(range(n)), cursor)

    def on_start(self, n: int, delay: float) -> None:
        record("hooked", "start")

    def on_resume(self, n: int, delay: float) -> None:
        record("hooked", ["resume", wurk.redis.llen("seen:echo")])

    @contextmanager
    def around_iteration(self, item: int, n: int, delay: float) -> Iterator[None]:
        record("hooked", ["in", item])
        yield
        record("hooked", ["out", item])

    def each_iteration(self, item: int, n: int, delay: float) -> None:
        record("hooked", item)
        time.sleep(delay)

    def on_stop(self, n: int, delay: float) -> None:
        record("hooked", "stop")

    def on_cancel(self, n: int, delay: float) -> None:
        record("hooked", "cancel")

    def on_complete(self, n: int, delay: float) -> None:
        record("hooked", "complete")


class OwnBaseException(BaseException):
    """A library's own ``BaseException`` subclass (neither ``Exception`` nor the worker's)."""


#: What ``leaves_by`` raises, by name: every way out of a job that is not an ``Exception``.
EXITS: dict[str, Any] = {
    "exit": lambda: SystemExit(2),
    "keyboard": KeyboardInterrupt,
    "generator": GeneratorExit,
    "own": lambda: OwnBaseException("from a library"),
}


@job(retry=1)
def leaves_by(how: str) -> None:
    """Leaves with a ``BaseException`` (``sys.exit(2)`` for ``"exit"``, as argparse does on bad input)."""
    record("leaves_by", [how, os.getpid()])
    raise EXITS[how]()


@job(retry=0)
def leaves_for_good(how: str) -> None:
    """As ``leaves_by``, with no retry: straight to the dead set."""
    record("leaves_for_good", how)
    raise EXITS[how]()


@job
def reports_its_wait(enqueued_at: float, seconds: float = 0.0) -> None:
    """Records how long it waited between its enqueue (``time.time()``) and its start, then runs ``seconds``."""
    waited = time.time() - enqueued_at
    wurk.redis.rpush("seen:waited", json.dumps([waited, seconds]))
    time.sleep(seconds)


@job
def counts_its_runs(n: int) -> None:
    """Counts each start of job ``n`` (a hash field per job), so a test sees which jobs ran again."""
    wurk.redis.hincrby("runs", str(n), 1)


@job(queue="capped")
def capped(n: int, seconds: float = 0.05, until: str = "") -> None:
    """Counts the jobs of its queue running at once (``caps:levels`` gets the count each one
    saw as it started); runs ``seconds``, and on until the key ``until`` exists if one is named."""
    r = wurk.redis
    r.rpush("caps:levels", r.incr("caps:running"))
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or (until and not r.exists(until)):
            time.sleep(0.01)
    finally:
        r.decr("caps:running")
    record("capped", n)
