"""``django_wurk.signals``: a real worker sends each signal, with the arguments its docs give.

The Django app adds ``signals.FEATURE`` to the engine (``apps.py``); these tests run a
``Launcher`` on that engine against the test's Redis and record what the receivers get.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.dispatch import Signal

from django_wurk import Wurk, limiter, signals
from django_wurk.core.events import Process
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs, limiter_jobs


class Received:
    """What each connected signal was sent, in order, from whichever thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    @contextmanager
    def connect(self, *names: str) -> Iterator[None]:
        receivers = []
        for name in names:

            def receiver(sender: Any, name: str = name, **kwargs: Any) -> None:
                with self.lock:
                    self.calls.append((name, sender, kwargs))

            signal: Signal = getattr(signals, name)
            signal.connect(receiver, weak=False)
            receivers.append((signal, receiver))
        try:
            yield
        finally:
            for signal, receiver in receivers:
                signal.disconnect(receiver)

    def of(self, name: str, jid: str | None = None) -> list[tuple[Any, dict[str, Any]]]:
        with self.lock:
            return [
                (sender, kwargs)
                for got, sender, kwargs in self.calls
                if got == name and (jid is None or kwargs.get("jid") == jid)
            ]

    def names(self, jid: str) -> list[str]:
        with self.lock:
            return [name for name, _, kwargs in self.calls if kwargs.get("jid") == jid]


JOB_SIGNALS = ("job_started", "job_succeeded", "job_failed", "job_retried", "job_died")


@pytest.fixture
def received() -> Iterator[Received]:
    got = Received()
    with got.connect(*JOB_SIGNALS, "worker_ready", "worker_quieting", "worker_stopping"):
        yield got


@pytest.fixture
def worker(wurk: Wurk, received: Received) -> Iterator[Launcher]:
    launcher = Launcher(wurk)
    launcher.start()
    try:
        yield launcher
    finally:
        launcher.stop()


def test_the_django_app_builds_the_engine_with_the_signals_feature() -> None:
    from django_wurk import wurk

    assert wurk.feature("signals") is not None
    # Inside the features that may turn a job away, outside the timeout and encryption.
    owners = wurk.server_middleware.owners()
    assert (
        owners.index("limiters") < owners.index("unique") < owners.index("expiring") < owners.index("signals")
    )
    assert owners.index("signals") < owners.index("timeouts") < owners.index("encryption")


def test_a_worker_sends_ready_quieting_and_stopping_with_its_identity(wurk: Wurk, received: Received) -> None:
    launcher = Launcher(wurk)
    launcher.start()
    try:
        [(sender, kwargs)] = wait_for(lambda: received.of("worker_ready"))
        assert isinstance(sender, Process) and kwargs == {
            "identity": launcher.identity,
            "signal": signals.worker_ready,
        }
        assert sender.identity == launcher.identity
        assert received.of("worker_quieting") == [] and received.of("worker_stopping") == []
    finally:
        launcher.stop()
    names = [name for name, _, _ in received.calls if name.startswith("worker_")]
    assert names == ["worker_ready", "worker_quieting", "worker_stopping"]
    for name in names:
        [(sender, kwargs)] = received.of(name)
        assert sender.identity == kwargs["identity"] == launcher.identity


def test_a_job_that_succeeds_sends_started_then_succeeded(
    wurk: Wurk, worker: Launcher, received: Received
) -> None:
    jid = jobs.echo.perform_async(1, "two")
    wait_for(lambda: received.of("job_succeeded", jid))
    assert received.names(jid) == ["job_started", "job_succeeded"]
    [(sender, started)] = received.of("job_started", jid)
    [(same, succeeded)] = received.of("job_succeeded", jid)
    assert sender is same is jobs.echo.job_class
    assert started["job"] is succeeded["job"] and isinstance(started["job"], jobs.echo.job_class)
    assert started["job"].jid == jid
    for kwargs in (started, succeeded):
        assert kwargs["jid"] == jid and kwargs["queue"] == "default"
        assert kwargs["payload"]["args"] == [1, "two"] and kwargs["payload"]["jid"] == jid
    assert set(started) == {"signal", "job", "jid", "payload", "queue"}
    assert set(succeeded) == {"signal", "job", "jid", "payload", "queue", "runtime"}
    assert 0 <= succeeded["runtime"] < 5


def test_a_failure_sends_failed_then_retried(
    wurk: Wurk, r: Any, worker: Launcher, received: Received
) -> None:
    jid = jobs.always_fails.perform_async(7)
    wait_for(lambda: received.of("job_retried", jid))
    assert received.names(jid) == ["job_started", "job_failed", "job_retried"]
    [(sender, failed)] = received.of("job_failed", jid)
    assert sender is jobs.always_fails.job_class
    assert set(failed) == {"signal", "jid", "payload", "queue", "exception"}
    assert isinstance(failed["exception"], ValueError) and str(failed["exception"]) == "boom 7"
    assert failed["queue"] == "default" and failed["payload"]["args"] == [7]
    [(sender, retried)] = received.of("job_retried", jid)
    assert sender is jobs.always_fails.job_class
    assert set(retried) == {"signal", "jid", "payload", "exception"}
    # The entry as written to the retry set.
    assert retried["payload"]["retry_count"] == 0 and retried["payload"]["error_message"] == "boom 7"
    assert retried["exception"] is failed["exception"]
    assert r.zcard("retry") == 1


def test_a_job_without_retries_sends_failed_then_died(
    wurk: Wurk, r: Any, worker: Launcher, received: Received
) -> None:
    jid = jobs.dies_at_once.perform_async(3)
    wait_for(lambda: received.of("job_died", jid))
    assert received.names(jid) == ["job_started", "job_failed", "job_died"]
    [(sender, died)] = received.of("job_died", jid)
    assert sender is jobs.dies_at_once.job_class
    assert set(died) == {"signal", "jid", "payload", "exception"}
    assert str(died["exception"]) == str(received.of("job_failed", jid)[0][1]["exception"])
    assert died["payload"]["args"] == [3]
    wait_for(lambda: r.zcard("dead") == 1)


def test_an_unknown_class_fails_with_no_sender(
    wurk: Wurk, r: Any, worker: Launcher, received: Received
) -> None:
    r.lpush("queue:default", '{"retry":true,"queue":"default","class":"NoSuchJob","args":[],"jid":"nosuch"}')
    wait_for(lambda: received.of("job_retried", "nosuch"))
    assert received.names("nosuch") == ["job_failed", "job_retried"]  # it never started
    [(sender, failed)] = received.of("job_failed", "nosuch")
    assert sender is None and type(failed["exception"]).__name__ == "UnknownJobError"


def test_a_rate_limited_job_neither_failed_nor_succeeded(
    wurk: Wurk, r: Any, worker: Launcher, received: Received
) -> None:
    full = limiter.window("test-full", 1, 86_400, wait_timeout=0)
    assert full.attempt().admitted  # the day's one call: the job is refused, and rescheduled
    jid = limiter_jobs.never_admitted.perform_async(1)
    wait_for(lambda: r.zcard("schedule") == 1)
    assert received.names(jid) == ["job_started"]
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0


def test_a_receiver_that_raises_fails_neither_the_job_nor_the_others(
    wurk: Wurk, r: Any, worker: Launcher, received: Received
) -> None:
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("a receiver's bug")

    signals.job_started.connect(broken, weak=False)
    try:
        jid = jobs.echo.perform_async("still runs")
        wait_for(lambda: received.of("job_succeeded", jid))
    finally:
        signals.job_started.disconnect(broken)
    assert received.names(jid) == ["job_started", "job_succeeded"]
    assert r.zcard("retry") == 0
