"""Celery's ``celery.result``: ``from django_wurk.celery.result import AsyncResult``.

The classes live where this layer builds them (``results``, ``canvas``, ``task``); this module
only gives them Celery's import path, so changing ``celery`` to ``django_wurk.celery`` in a
project's imports is enough.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django_wurk.celery.canvas import GroupResult
from django_wurk.celery.results import AsyncResult
from django_wurk.celery.task import EagerResult


@contextmanager
def allow_join_result() -> Iterator[None]:
    """Celery's guard for ``get()`` inside a task: nothing to allow here, ``get()`` never refuses."""
    yield


__all__ = ["AsyncResult", "EagerResult", "GroupResult", "allow_join_result"]
