"""The health port of a ``-P N`` swarm, served by its supervisor for all its children.

prometheus-client's multi-process mode: before the first fork the supervisor points
``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory of its own; each child writes its series
to files there named by its pid, and ``/metrics`` adds them up. When a child exits its live
gauges (busy threads) are dropped (``mark_process_dead``); its counters stay, so a replaced
child's jobs are still counted. The directory is removed when the supervisor exits.

``/live``: the supervisor answers and has at least one child. ``/ready``: every child has
registered, beat within ``ready_window`` and is not quiet; a child being replaced makes
the pod not ready until its successor's first heartbeat (a worker at part strength is
worth a look, and the heartbeat comes at once at start-up).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core import keys
from django_wurk.core.features.observability.health import HealthServer, Verdict, heartbeat_verdict

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.features.observability.options import HealthOptions

ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_multiprocess_dir() -> str:
    """A fresh directory for the children's files; call before prometheus-client is imported."""
    path = tempfile.mkdtemp(prefix="wurk-metrics-")
    os.environ[ENV] = path
    supervisor = os.getpid()

    def remove() -> None:
        if os.getpid() == supervisor:  # a forked child leaving must not take it along
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path


def child_exited(path: str) -> Callable[[int], None]:
    def mark(pid: int) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]

    return mark


def children_identities(wurk: Wurk, pids: Iterable[int]) -> tuple[list[bytes], list[int]]:
    """The identities the children registered in ``processes``, and the pids not seen yet."""
    host = wurk.config.hostname
    wanted = {f"{host}:{pid}:": pid for pid in pids}
    found: dict[int, bytes] = {}
    for member in wurk.redis.smembers(keys.PROCESSES):
        if not isinstance(member, bytes):
            continue
        name = member.decode("utf-8", "replace")
        prefix = name[: name.rfind(":") + 1]
        if prefix in wanted:
            found[wanted[prefix]] = member
    return list(found.values()), [pid for pid in wanted.values() if pid not in found]


def serve(
    wurk: Wurk,
    health: HealthOptions,
    path: str,
    children: Callable[[], list[int]],
    redis_in_use: threading.Lock,
) -> HealthServer:
    """The supervisor's health port. Its probes read Redis from the server's threads while
    the supervisor's own thread, before each fork, drops every connection of the pool
    (``wurk.reset()``), including one a probe is reading from: a scrape then failed (500)
    whenever a child was replaced. So a probe holds ``redis_in_use`` while it reads, and the
    supervisor holds it to reset.
    """
    from django_wurk.core.features.observability import exposition

    scrape = exposition.multi_process(wurk, path)

    def metrics() -> tuple[bytes, str]:
        with redis_in_use:
            return scrape()

    def live() -> Verdict:
        pids = children()
        return (bool(pids), f"supervisor {os.getpid()} with {len(pids)} worker process(es)")

    def ready() -> Verdict:
        with redis_in_use:
            try:
                identities, missing = children_identities(wurk, children())
            except RedisError as exc:
                return False, f"Redis is unreachable: {exc}"
            if missing:
                return False, f"worker process(es) {', '.join(map(str, missing))} not registered yet"
            return heartbeat_verdict(wurk.redis, identities, health.ready_window)

    server = HealthServer(health.bind, health.port, metrics=metrics, live=live, ready=ready)
    server.start()
    return server
