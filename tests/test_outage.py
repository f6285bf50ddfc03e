"""How a worker process reports a Redis outage: once when it starts, once when it ends.

The threads here are real threads calling the shared ``Outage`` as the worker's loops do;
no Redis is involved because the behaviour under test is the bookkeeping of failures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from django_wurk.core.worker.outage import Outage

REFUSED = ConnectionError("Connection refused")
STALE = ConnectionError("Connection closed by server.")


def in_thread(step: Callable[[], None]) -> None:
    thread = threading.Thread(target=step)
    thread.start()
    thread.join()


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "django_wurk.redis"]


def test_one_outage_seen_by_many_threads_is_reported_once_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage("redis://:secret@example:6379/0")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    # Seven loops (processors, poller, heartbeat, reaper) each fail three times, then all succeed.
    all_failed = threading.Barrier(7)

    def loop() -> None:
        for _ in range(3):
            outage.failed(REFUSED)
        all_failed.wait()
        outage.recovered()

    threads = [threading.Thread(target=loop) for _ in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    messages = logged(caplog)
    assert [m for m in messages if "unreachable" in m] == [
        "Redis at redis://:***@example:6379/0 is unreachable (Connection refused); retrying with back-off"
    ]
    assert [m for m in messages if "reachable again" in m] == [
        "Redis at redis://:***@example:6379/0 is reachable again after 21 failed attempts"
    ]


def test_stale_connections_failing_once_after_a_restart_are_not_a_second_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The CI failure: after Redis came back, four threads' old sockets each failed once."""
    outage = Outage("redis://127.0.0.1:6379/0")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    in_thread(lambda: (outage.failed(REFUSED), outage.failed(REFUSED), outage.recovered()))
    assert len(logged(caplog)) == 2  # unreachable, then reachable again
    for _ in range(4):
        in_thread(lambda: (outage.failed(STALE), outage.recovered()))
    # And all four stale failures before any of the reconnects succeed:
    gate = threading.Barrier(4)
    stale = [
        threading.Thread(target=lambda: (outage.failed(STALE), gate.wait(), outage.recovered()))
        for _ in range(4)
    ]
    for t in stale:
        t.start()
    for t in stale:
        t.join()
    assert len(logged(caplog)) == 2


def test_a_thread_failing_twice_in_a_row_is_an_outage_and_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("redis://127.0.0.1:6379/0")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    delays: list[float] = []

    def flaky() -> None:
        outage.failed(STALE)
        delays.append(outage.backoff())
        assert logged(caplog) == []
        outage.failed(REFUSED)
        delays.append(outage.backoff())
        outage.failed(REFUSED)
        delays.append(outage.backoff())

    in_thread(flaky)
    assert delays == sorted(delays) and delays[0] < delays[-1] <= Outage.MAX_BACKOFF
    assert len([m for m in logged(caplog) if "unreachable" in m]) == 1
    in_thread(outage.recovered)  # another thread's success ends the outage
    assert logged(caplog)[-1].endswith("reachable again after 3 failed attempts")
