"""A worker keeps its processor threads: a job's ``BaseException`` is that job's failure, a
thread that ends anyway is replaced and logged, and ``/ready`` fails while one is missing.

The subprocess cases (``runwurk -c 1``, ``-P 2 -c 1``) are in ``faults/test_job_exits.py``.
"""

from __future__ import annotations

import ctypes
import json
import logging
import threading
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.core.features.observability.health import heartbeat_verdict
from django_wurk.core.worker.launcher import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs


def raise_in(thread: threading.Thread, exc: type[BaseException]) -> None:
    """What no ``except`` in the processor's loop expects: an exception raised from outside."""
    assert thread.ident is not None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))


@pytest.fixture
def launcher(wurk: Wurk, test_config: Config) -> Any:
    wurk.configure(test_config.replace(concurrency=2))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def test_a_thread_that_ends_unseen_is_replaced_and_ready_fails_until_it_is(
    launcher: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    victim = launcher.manager.processors[0]
    victim.on_died = lambda processor: None  # as if it had ended past its own ``except``
    raise_in(victim.thread, jobs.OwnBaseException)
    wait_for(lambda: not victim.thread.is_alive())
    assert launcher.live_threads() == 1

    launcher.heartbeat.beat()
    ready, why = heartbeat_verdict(r, [launcher.identity], 60)
    assert not ready
    assert why == f"{launcher.identity}: 1 of 2 processor threads running"

    with caplog.at_level(logging.ERROR, logger="django_wurk.manager"):
        launcher.replace_dead_threads()
    assert launcher.live_threads() == 2
    assert victim not in launcher.manager.processors
    assert f"processor thread {victim.thread.name} ended unexpectedly" in caplog.text
    launcher.heartbeat.beat()
    assert heartbeat_verdict(r, [launcher.identity], 60) == (True, "1 process(es) ready")

    for _ in range(4):  # both threads take jobs again
        jobs.overlapping.perform_async("both", 0.3)
    wait_for(lambda: r.llen("seen:overlap-both") == 4)
    assert max(json.loads(x) for x in r.lrange("seen:overlap-both", 0, -1)) == 2


def test_a_thread_that_dies_on_its_own_error_is_replaced_at_once(
    launcher: Launcher, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    victim = launcher.manager.processors[1]
    with caplog.at_level(logging.CRITICAL, logger="django_wurk.processor"):
        raise_in(victim.thread, jobs.OwnBaseException)
        wait_for(lambda: victim not in launcher.manager.processors)
        wait_for(lambda: launcher.live_threads() == 2)
    assert f"processor thread {victim.thread.name} died" in caplog.text
    jobs.echo.perform_async("after")
    wait_for(lambda: r.llen("seen:echo") == 1)


def test_the_launcher_replaces_dead_threads_while_it_runs(wurk: Wurk, test_config: Config) -> None:
    """The wiring: ``run()``'s loop looks for dead threads about once a second."""
    wurk.configure(test_config.replace(concurrency=2))
    worker = Launcher(wurk)
    runner = threading.Thread(target=worker.run, kwargs={"handle_os_signals": False}, daemon=True)
    runner.start()
    try:
        wait_for(lambda: worker._started and len(worker.manager.processors) == 2)
        victim = worker.manager.processors[0]
        victim.on_died = lambda processor: None
        raise_in(victim.thread, jobs.OwnBaseException)
        # About once a second; the deadline is for a loaded machine, a poll ends at once when done.
        wait_for(lambda: victim not in worker.manager.processors and worker.live_threads() == 2, timeout=30)
    finally:
        worker.signal("TERM")
        runner.join(30)
    assert not runner.is_alive()
