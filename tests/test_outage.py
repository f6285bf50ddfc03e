"""How a worker process reports a Redis outage, and how its writes ride one out.

The threads here are real threads calling the shared ``Outage`` as the worker's loops do;
the reporting tests need no Redis because the behaviour under test is the bookkeeping of
failures. ``ride_out`` is tried against real connections: one to a port nothing listens
on, and the suite's server.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

import pytest
import redis as redis_lib
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

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


# Outage.ride_out: the one loop that carries a write through an outage ---------------------


def unreachable_redis() -> redis_lib.Redis:
    """A real client for a port nothing listens on: every command fails to connect.

    Without the client's own retries, so each attempt is one refused connection and the
    timing under test is ``ride_out``'s.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return redis_lib.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


def test_ride_out_tries_again_until_redis_answers_and_reports_the_end(
    r: redis_lib.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage("redis://127.0.0.1:6379/0")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    down = unreachable_redis()
    attempts: list[str] = []

    def write() -> str:
        attempts.append("try")
        client = down if len(attempts) <= 3 else r  # Redis comes back on the fourth attempt
        client.set("ridden-out", "yes")
        return "written"

    def give_up(exc: RedisError) -> str:
        raise AssertionError(f"gave up before the deadline: {exc}")

    result = outage.ride_out(write, time.monotonic() + 60, give_up)
    assert (result, len(attempts), r.get("ridden-out")) == ("written", 4, b"yes")
    messages = logged(caplog)
    assert len(messages) == 2 and "unreachable" in messages[0]
    assert messages[1].endswith("reachable again after 3 failed attempts")


def test_ride_out_gives_up_after_the_deadline_with_the_last_error() -> None:
    outage = Outage("redis://127.0.0.1:6379/0")
    down = unreachable_redis()
    failed_at: list[float] = []
    given_up: list[RedisError] = []

    def write() -> None:
        try:
            down.ping()
        finally:
            failed_at.append(time.monotonic())

    def give_up(exc: RedisError) -> None:
        given_up.append(exc)

    deadline = time.monotonic() + 0.5
    assert outage.ride_out(write, deadline, give_up) is None
    assert len(given_up) == 1 and isinstance(given_up[0], redis_lib.ConnectionError)
    # Tried again with back-off until an attempt failed past the deadline, and not before.
    assert len(failed_at) >= 2 and failed_at[-1] > deadline and failed_at[-2] <= deadline
    assert failed_at == sorted(failed_at) and failed_at[1] - failed_at[0] >= 0.1  # backed off


def test_ride_out_raises_anything_but_an_outage_at_once() -> None:
    """An entry that cannot be written fails the same way every time: no retrying it."""
    outage = Outage("redis://127.0.0.1:6379/0")
    attempts: list[int] = []

    def write() -> None:
        attempts.append(1)
        raise ValueError("Out of range float values are not JSON compliant")

    with pytest.raises(ValueError, match="Out of range"):
        outage.ride_out(write, time.monotonic() + 60, lambda exc: None)
    assert attempts == [1]


def test_a_write_with_nothing_to_send_is_not_taken_for_redis_coming_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A processor thread leaving during an outage acknowledges nothing, which needs no Redis:
    that logged "reachable again after 166 failed attempts" while Redis was still down."""
    outage = Outage("redis://127.0.0.1:6379/0")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    down = unreachable_redis()

    def leave() -> None:
        for _ in range(3):  # its loop's fetches fail
            try:
                down.ping()
            except RedisError as exc:
                outage.failed(exc)
        outage.ride_out(lambda: None, time.monotonic() + 60, lambda exc: None)  # nothing to acknowledge

    in_thread(leave)
    messages = logged(caplog)
    assert len(messages) == 1 and "unreachable" in messages[0]
    # A write that did fail first, then went through, does end the outage.
    attempts: list[int] = []

    def write() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            down.ping()

    in_thread(lambda: outage.ride_out(write, time.monotonic() + 60, lambda exc: None))
    assert logged(caplog)[-1].endswith("reachable again after 5 failed attempts")


def test_an_answer_no_wait_can_change_is_reported_as_a_refusal_not_an_outage(
    r: redis_lib.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """After the start (which such an answer stops, see worker/preflight.py): Redis restarted
    with fewer databases, say. The log says what to fix instead of "unreachable"."""
    outage = Outage("redis://127.0.0.1:6379/99")
    caplog.set_level(logging.INFO, logger="django_wurk.redis")
    where = r.connection_pool.connection_kwargs
    missing_db = redis_lib.Redis(host=where["host"], port=where["port"], db=99, retry=Retry(NoBackoff(), 0))
    with pytest.raises(RedisError) as err:
        missing_db.ping()
    in_thread(lambda: (outage.failed(err.value), outage.failed(err.value)))
    [message] = logged(caplog)
    assert message == (
        "Redis at redis://127.0.0.1:6379/99 refuses this worker: it has no database of the number the URL"
        " ends with: DB index is out of range; retrying with back-off"
    )
