"""django-wurk's side of ``bench/client.py``: ``perform_async``, ``perform_bulk``, and a batch."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
django.setup()

from bench.benchapp import jobs  # noqa: E402

JOBS = {"noop": jobs.noop, "cpu": jobs.cpu, "io": jobs.io, "lat": jobs.lat}


def push(workload: str, args: tuple[object, ...]) -> None:
    JOBS[workload].perform_async(*args)


def push_bulk(workload: str, args: list[tuple[object, ...]]) -> None:
    JOBS[workload].perform_bulk(args)


def push_batch(workload: str, args: list[tuple[object, ...]]) -> None:
    """The same bulk push, inside one batch with a success callback."""
    from django_wurk import Batch

    batch = Batch(description="bench")
    batch.on("success", jobs.BenchBatchDone)
    with batch.jobs():
        JOBS[workload].perform_bulk(args)
