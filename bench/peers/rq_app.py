"""RQ: the benchmark's jobs.

Worker: ``rq worker-pool -n 2 -w rq.worker.SimpleWorker default``: two processes, each running
jobs in-process instead of forking a work horse per job.
"""

from __future__ import annotations

import os

from redis import Redis
from rq import Queue

from bench import jobside


def noop(*args: object) -> None:
    jobside.begin()
    jobside.end()


def cpu(*args: object) -> None:
    jobside.begin()
    jobside.cpu()
    jobside.end()


def io(*args: object) -> None:
    jobside.begin()
    jobside.io()
    jobside.end()


def lat(enqueued_at: float) -> None:
    jobside.begin()
    jobside.record_latency(enqueued_at)
    jobside.end()


FUNCTIONS = {"noop": noop, "cpu": cpu, "io": io, "lat": lat}
queue = Queue("default", connection=Redis.from_url(os.environ["BENCH_REDIS_URL"]))


def push(workload: str, args: tuple[object, ...]) -> None:
    # result_ttl=0: nobody reads the (empty) results, so RQ need not keep them.
    queue.enqueue(FUNCTIONS[workload], *args, result_ttl=0)


def push_bulk(workload: str, args: list[tuple[object, ...]]) -> None:
    data = [Queue.prepare_data(FUNCTIONS[workload], a, result_ttl=0) for a in args]
    for i in range(0, len(data), 1000):
        queue.enqueue_many(data[i : i + 1000])
