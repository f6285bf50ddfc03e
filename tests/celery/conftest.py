from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core.config import QueueSpec
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks


@pytest.fixture
def celery_workers(wurk: Wurk, test_config: Any) -> Iterator[Launcher]:
    """The ``workers`` fixture's worker, listening to the tasks' queues too."""
    wurk.configure(test_config.replace(concurrency=10, queues=(QueueSpec("default"), QueueSpec("math"))))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture(autouse=True)
def fresh_calls() -> Iterator[None]:
    celery_style_tasks.CALLS.clear()
    yield
    celery_style_tasks.CALLS.clear()
