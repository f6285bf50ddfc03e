"""Celery: the benchmark's tasks.

Worker: ``celery -A bench.peers.celery_app worker -P prefork -c 2 --without-gossip
--without-mingle --without-heartbeat``; the throughput settings are below.
"""

from __future__ import annotations

import os

from celery import Celery

from bench import jobside

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(
    # Celery's "Optimizing" guide: no result backend for tasks whose results nobody reads,
    # a large prefetch for many short tasks, and no rate-limit machinery when unused.
    task_ignore_result=True,
    worker_prefetch_multiplier=64,
    worker_disable_rate_limits=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task
def noop(*args: object) -> None:
    jobside.begin()
    jobside.end()


@app.task
def cpu(*args: object) -> None:
    jobside.begin()
    jobside.cpu()
    jobside.end()


@app.task
def io(*args: object) -> None:
    jobside.begin()
    jobside.io()
    jobside.end()


@app.task
def lat(enqueued_at: float) -> None:
    jobside.begin()
    jobside.record_latency(enqueued_at)
    jobside.end()


TASKS = {"noop": noop, "cpu": cpu, "io": io, "lat": lat}


def push(workload: str, args: tuple[object, ...]) -> None:
    TASKS[workload].delay(*args)


push_bulk = None
