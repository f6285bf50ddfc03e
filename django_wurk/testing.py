"""Test helpers: run code that enqueues jobs without a worker or a Redis server.

``fake()`` records every push per job class (``jobs.jobs_for(send_welcome)``) and runs
them on demand with ``drain()``; ``inline()`` runs each job as soon as it is pushed.
Both go through the client middleware, the server middleware and a JSON round trip, so a
job that would fail on a real worker (a non-JSON argument, say) fails here too. Both are
context managers, and the pytest plugin offers them as the ``wurk_fake`` and
``wurk_inline`` fixtures.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django_wurk.core import activejob, wire
from django_wurk.core.client import NO_DELIVERY, Delivery
from django_wurk.core.engine import Wurk
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.wire import Payload

__all__ = ["FakeQueues", "fake", "inline"]


def _wire_name(job: Any) -> str:
    name = getattr(job, "wire_name", job)
    if not isinstance(name, str):
        raise TypeError(f"expected a job, a job function or a wire name, got {job!r}")
    return name


class FakeQueues:
    """Recorded pushes, in push order, per wire name. Scheduled jobs carry an ``at`` key."""

    #: It takes the writer's place and keeps jobs in memory: features keep no Redis state.
    writes_to_redis = False

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk
        self._jobs: dict[str, list[Payload]] = {}

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        stamp = wire.now_stamp(self.wurk.config.timestamps)
        for payload in payloads:
            recorded = wire.loads(wire.dumps(payload))
            if at is None:
                recorded["enqueued_at"] = stamp
            else:
                recorded["at"] = at
            # An ActiveJob-shaped push is filed under the job it wraps, like any other.
            name = activejob.job_name(recorded) or recorded["class"]
            self._jobs.setdefault(name, []).append(recorded)

    def jobs_for(self, job: Any) -> list[Payload]:
        return list(self._jobs.get(_wire_name(job), []))

    def all(self) -> list[Payload]:
        return [p for payloads in self._jobs.values() for p in payloads]

    def count(self, job: Any = None) -> int:
        return len(self.all()) if job is None else len(self.jobs_for(job))

    def clear(self, job: Any = None) -> None:
        if job is None:
            self._jobs.clear()
        else:
            self._jobs.pop(_wire_name(job), None)

    def perform_one(self, job: Any) -> Any:
        """Run the oldest recorded push of ``job`` (it is removed first)."""
        payloads = self._jobs.get(_wire_name(job))
        if not payloads:
            raise LookupError(f"no {_wire_name(job)} job has been pushed")
        return self._run(payloads.pop(0))

    def drain(self, job: Any = None, include_scheduled: bool = True) -> int:
        """Run recorded jobs, including any they push, until none are left; returns how many ran.

        An exception from a job propagates, as it would fail the job on a worker.
        """
        ran = 0
        while True:
            picked = self._next(None if job is None else _wire_name(job), include_scheduled)
            if picked is None:
                return ran
            self._run(picked)
            ran += 1

    def _next(self, name: str | None, include_scheduled: bool) -> Payload | None:
        names = [name] if name else list(self._jobs)
        for n in names:
            for i, payload in enumerate(self._jobs.get(n, [])):
                if include_scheduled or payload.get("at", 0) <= time.time():
                    return self._jobs[n].pop(i)
        return None

    def _run(self, payload: Payload) -> Any:
        payload = dict(payload)
        if payload.pop("at", None) is not None:
            # A worker sees a scheduled job only once it is enqueued, with an enqueued_at.
            payload["enqueued_at"] = wire.now_stamp(self.wurk.config.timestamps)
        return self.wurk.execute(payload)


class InlinePusher:
    """Runs each pushed job at once, in the pushing thread."""

    #: It takes the writer's place: nothing is written to Redis.
    writes_to_redis = False

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        stamp = wire.now_stamp(self.wurk.config.timestamps)
        for payload in payloads:
            decoded = wire.loads(wire.dumps({**payload, "enqueued_at": stamp}))
            self.wurk.execute(decoded)


@contextmanager
def fake(wurk: Wurk = default_wurk) -> Iterator[FakeQueues]:
    queues = FakeQueues(wurk)
    previous, wurk.pusher = wurk.pusher, queues
    try:
        yield queues
    finally:
        wurk.pusher = previous


@contextmanager
def inline(wurk: Wurk = default_wurk) -> Iterator[None]:
    previous, wurk.pusher = wurk.pusher, InlinePusher(wurk)
    try:
        yield
    finally:
        wurk.pusher = previous
