"""Jobs and callbacks the batch tests run in real workers (imported by the app, so
``runwurk`` subprocesses know them too). Each records what it saw in Redis."""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk import Batch, BatchCallback, BatchStatus, Job, job, wurk


def record(name: str, value: Any) -> None:
    wurk.redis.rpush(f"seen:{name}", json.dumps(value))


def runs(name: str) -> list[Any]:
    return [json.loads(x) for x in wurk.redis.lrange(f"seen:{name}", 0, -1)]


@job
def work(n: int, seconds: float = 0.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.005)
    batch = Batch.current()
    record("work", [n, batch.bid if batch else None])


@job(retry=3)
def flaky(n: int) -> None:
    """Fails its first attempt, succeeds on the retry (retried one second later)."""
    if wurk.redis.incr(f"flaky:{n}") == 1:
        raise RuntimeError(f"flaky {n}")
    record("flaky", n)


def _soon(count: int, exc: BaseException) -> int:
    return 1


flaky.job_class.retry_in_hook = staticmethod(_soon)


@job(retry=0)
def dies(n: int) -> None:
    raise RuntimeError(f"dies {n}")


@job(retry=False)
def dropped(n: int) -> None:
    raise RuntimeError(f"dropped {n}")


@job(retry=0)
def fixed_later(n: int) -> None:
    """Dies until ``fixed`` is set in Redis (retry from the dead set once it is)."""
    if not wurk.redis.get("fixed"):
        raise RuntimeError(f"not fixed yet {n}")
    record("fixed_later", n)


class Grows(Job):
    """Adds ``more`` jobs to its own batch while it runs."""

    wire_name = "tests.Grows"

    def perform(self, more: int) -> None:
        assert self.batch is not None
        with self.batch.jobs():
            for i in range(more):
                work.perform_async(1000 + i)
        record("grows", self.bid)


class Cancellable(Job):
    wire_name = "tests.Cancellable"

    def perform(self, n: int) -> None:
        record("cancellable", [n, self.valid_within_batch()])


@job
def spawns_child(depth: int, width: int) -> None:
    """Opens a child batch of the running job's batch, down to ``depth`` levels."""
    child = Batch(description=f"level {depth}")
    child.on("complete", Recorder, {"level": depth})
    child.on("success", Recorder, {"level": depth})
    with child.jobs():
        for i in range(width):
            work.perform_async(depth * 100 + i)
        if depth > 1:
            spawns_child.perform_async(depth - 1, width)


class Recorder(BatchCallback):
    """Records every call: event, bid, options and the status it was given."""

    def _record(self, event: str, status: BatchStatus, options: dict[str, Any]) -> None:
        record(
            "callbacks",
            {
                "event": event,
                "bid": status.bid,
                "options": options,
                "total": status.total,
                "pending": status.pending,
                "failures": status.failures,
                "complete": status.complete,
                "running_bid": (Batch.current().bid if Batch.current() else None),
            },
        )

    def on_complete(self, status: BatchStatus, options: dict[str, Any]) -> None:
        self._record("complete", status, options)

    def on_success(self, status: BatchStatus, options: dict[str, Any]) -> None:
        self._record("success", status, options)

    def on_death(self, status: BatchStatus, options: dict[str, Any]) -> None:
        self._record("death", status, options)

    def finished(self, status: BatchStatus, options: dict[str, Any]) -> None:
        self._record("finished", status, options)


class FailsTwice(BatchCallback):
    """Raises on its first two calls, then records; proves callbacks are retried."""

    def on_complete(self, status: BatchStatus, options: dict[str, Any]) -> None:
        if wurk.redis.incr(f"fails-twice:{status.bid}") <= 2:
            raise RuntimeError("callback not ready yet")
        record("callbacks", {"event": "complete", "bid": status.bid, "options": options})
