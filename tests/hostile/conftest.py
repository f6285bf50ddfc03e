"""Fixtures for the corpus tests: real in-process workers with fast loops, watched for crashes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from django_wurk import Config, Wurk
from django_wurk.core import keys
from django_wurk.core.config import QueueSpec
from django_wurk.core.worker import Launcher
from tests.hostile.corpus import GOOD_RUNS, RUNS
from tests.hostile.ledger import LoopWatch, one_line

#: The queues the corpus workers read.
SERVED = ("default", "critical")
#: How long the workers get to work through a corpus before what is left is reported.
SETTLE = 25.0


def poll_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> bool:
    """Poll until ``predicate()`` is truthy; False at the deadline (the caller reports what is left)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


@dataclass
class Fleet:
    """Worker processes' engines (Launchers) running in this process, each with its own identity."""

    wurk: Wurk
    launchers: list[Launcher] = field(default_factory=list)

    def start(self, count: int = 2) -> Fleet:
        for _ in range(count):
            launcher = Launcher(self.wurk)
            launcher.start()
            self.launchers.append(launcher)
        return self

    def idle(self) -> bool:
        return all(not launcher.manager.work.snapshot() for launcher in self.launchers)

    def identities(self) -> list[str]:
        return [launcher.identity for launcher in self.launchers]

    def problems(self, label: str) -> list[str]:
        """Workers alive: every processor thread and loop thread still running."""
        out = []
        for launcher in self.launchers:
            who = f"{label}: worker {launcher.identity}"
            processors = launcher.manager.processors
            running = sum(p.thread.is_alive() for p in processors)
            if running != launcher.config.concurrency:
                out.append(f"{who}: {running} of {launcher.config.concurrency} processor threads running")
            loops = {"heartbeat": launcher.heartbeat.thread, "poller": launcher.poller.thread}
            if launcher.reaper is not None:
                loops["reaper"] = launcher.reaper.thread
            for name, thread in loops.items():
                if not thread.is_alive():
                    out.append(f"{who}: its {name} thread is dead")
        return out

    def stop(self, label: str = "teardown") -> list[str]:
        """Stop every worker; a stop that raises is a problem to report, not a reason to leave
        the others running."""
        out = []
        for launcher in self.launchers:
            try:
                launcher.stop()
            except Exception as exc:
                out.append(f"{label}: stopping worker {launcher.identity} raised {one_line(exc)}")
                launcher.manager.quiet()
                launcher.poller.stopping.set()
                launcher.heartbeat.stopping.set()
                if launcher.reaper is not None:
                    launcher.reaper.stopping.set()
        self.launchers.clear()
        return out


@pytest.fixture
def corpus_config(test_config: Config) -> Config:
    """Fast loops: the poller every 0.1 s, the reaper every 0.3 s. A process counts as dead 10 s
    after its last beat: far longer than a busy test machine ever delays one, so a live worker
    is never reaped; the dead workers of these tests have no beat at all or an ancient one."""
    return test_config.replace(
        queues=tuple(QueueSpec(q) for q in SERVED),
        concurrency=3,
        reaper_interval=0.3,
        process_dead_after=10.0,
        redis_pool_size=40,
    )


@pytest.fixture
def watch(wurk: Wurk) -> Iterator[LoopWatch]:
    """Every crash, failed pass and misreported outage of the worker loops during the test."""
    handler = LoopWatch()
    logger = logging.getLogger("django_wurk")
    logger.addHandler(handler)
    wurk.error_handlers.append(handler.error_handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def fleet(wurk: Wurk, corpus_config: Config, watch: LoopWatch) -> Iterator[Fleet]:
    """Not started: a test loads what must be there at start-up first, then calls ``start()``."""
    wurk.configure(corpus_config)
    workers = Fleet(wurk)
    try:
        yield workers
    finally:
        workers.stop()


# Waiting for the workers ---------------------------------------------------------------------


def private_lists(r: Any) -> dict[bytes, int]:
    """Every non-empty list named like a private list, and its length."""
    out = {}
    for key in r.scan_iter(match=keys.PRIVATE_QUEUE_PREFIX + "*", count=1000):
        if r.type(key) == b"list" and (n := r.llen(key)):
            out[key] = n
    return out


def backlog(r: Any) -> str:
    """What is still waiting: empty when the workers have nothing left to do."""
    now = repr(time.time())
    parts = []
    for q in SERVED:
        if n := r.llen(keys.queue(q)):
            parts.append(f"{n} in queue:{q}")
    for key, n in private_lists(r).items():
        parts.append(f"{n} in {key!r}")
    for name in (keys.RETRY, keys.SCHEDULE):
        if n := r.zcount(name, "-inf", now):
            parts.append(f"{n} due in {name}")
    return ", ".join(parts)


def progress(r: Any) -> tuple[Any, ...]:
    """Changes while the workers are getting anywhere."""
    pipe = r.pipeline(transaction=False)
    for name in (keys.RETRY, keys.SCHEDULE, keys.DEAD):
        pipe.zcard(name)
    pipe.hgetall(RUNS)
    pipe.hgetall(GOOD_RUNS)
    return (*pipe.execute(), backlog(r))


def settle(r: Any, fleet: Fleet, label: str, timeout: float = SETTLE, still: float = 3.0) -> list[str]:
    """Wait until the workers have nothing left to do, or until nothing has changed for ``still``
    seconds while they sat idle (what is left then is stranded: it is reported, not waited for)."""
    state: dict[str, Any] = {"seen": None, "since": time.monotonic()}

    def done() -> bool:
        if not fleet.idle():
            state["seen"] = None
            return False
        if not backlog(r):
            return True
        now, seen = time.monotonic(), progress(r)
        if seen != state["seen"]:
            state.update(seen=seen, since=now)
        return now - state["since"] >= still

    poll_until(done, timeout, interval=0.1)
    left = backlog(r)
    if not left:
        return []
    return [f"{label}: the workers stopped making progress with work left: {left}"]
