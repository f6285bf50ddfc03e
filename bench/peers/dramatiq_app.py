"""Dramatiq: the benchmark's actors. Worker: ``dramatiq bench.peers.dramatiq_app -p 2 -t 8``."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench import jobside

dramatiq.set_broker(RedisBroker(url=os.environ["BENCH_REDIS_URL"]))


@dramatiq.actor(max_retries=0)
def noop(*args: object) -> None:
    jobside.begin()
    jobside.end()


@dramatiq.actor(max_retries=0)
def cpu(*args: object) -> None:
    jobside.begin()
    jobside.cpu()
    jobside.end()


@dramatiq.actor(max_retries=0)
def io(*args: object) -> None:
    jobside.begin()
    jobside.io()
    jobside.end()


@dramatiq.actor(max_retries=0)
def lat(enqueued_at: float) -> None:
    jobside.begin()
    jobside.record_latency(enqueued_at)
    jobside.end()


ACTORS = {"noop": noop, "cpu": cpu, "io": io, "lat": lat}


def push(workload: str, args: tuple[object, ...]) -> None:
    ACTORS[workload].send(*args)


push_bulk = None
