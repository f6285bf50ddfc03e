"""The Busy page shows a job a real worker started a moment ago, not at the next 10 s beat."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from django_wurk import Config, Wurk
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.dashboard.conftest import url
from tests.jobsapp import jobs


@pytest.fixture
def worker(wurk: Wurk, test_config: Config) -> Iterator[Launcher]:
    wurk.configure(test_config.replace(heartbeat_interval=30.0, concurrency=2))
    launcher = Launcher(wurk)
    launcher.start()
    try:
        yield launcher
    finally:
        jobs.release.set()
        launcher.stop()
        jobs.release.clear()


# Transactional: inside a test transaction the enqueue would wait for a commit that never comes.
@pytest.mark.django_db(transaction=True)
def test_busy_page_lists_a_job_within_a_second(viewer: Client, worker: Launcher, r: Any) -> None:
    jid = jobs.blocks_until_released.perform_async("on the page")
    wait_for(lambda: r.lrange("seen:blocked", 0, -1), interval=0.005)
    started = time.monotonic()
    assert json.loads(r.lrange("seen:blocked", 0, -1)[0]) == "on the page"

    def page() -> str:
        response = viewer.get(url("busy"))
        assert response.status_code == 200
        return response.content.decode()

    while jid not in page():
        assert time.monotonic() - started < 1.0, "the Busy page did not show the job within a second"
        time.sleep(0.02)
    assert worker.identity in page()
