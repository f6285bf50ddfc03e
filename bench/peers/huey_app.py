"""Huey: the benchmark's tasks. Worker: ``huey_consumer bench.peers.huey_app.huey -w 2 -k process``."""

from __future__ import annotations

import os

from huey import RedisHuey

from bench import jobside

# Results off: the tasks return nothing and nobody reads them (Huey's docs: results=False).
huey = RedisHuey("bench", url=os.environ["BENCH_REDIS_URL"], results=False)


@huey.task()
def noop(*args: object) -> None:
    jobside.begin()
    jobside.end()


@huey.task()
def cpu(*args: object) -> None:
    jobside.begin()
    jobside.cpu()
    jobside.end()


@huey.task()
def io(*args: object) -> None:
    jobside.begin()
    jobside.io()
    jobside.end()


@huey.task()
def lat(enqueued_at: float) -> None:
    jobside.begin()
    jobside.record_latency(enqueued_at)
    jobside.end()


TASKS = {"noop": noop, "cpu": cpu, "io": io, "lat": lat}


def push(workload: str, args: tuple[object, ...]) -> None:
    TASKS[workload](*args)


push_bulk = None
