"""django-wurk's side of ``bench/client.py``: ``perform_async`` and ``perform_bulk``."""

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
