"""The health port: ``/metrics`` for Prometheus, ``/live`` and ``/ready`` for Kubernetes.

A small threaded HTTP server on a daemon thread, so a slow scrape never holds up a probe.
What the three paths answer is given to it as callables, because a worker process and a
``-P N`` supervisor answer them differently (see ``service`` and ``supervisor``).

``/ready`` is read from Redis, from the process hashes the heartbeat writes: a process is
ready when Redis answers, its last heartbeat (``beat``) is at most ``ready_window`` seconds
old, it is not quiet (``quiet``, set by TSTP), and it runs as many processor threads
(``threads``) as it was given (``concurrency``). So a TSTP shows at the next heartbeat,
and "connected to Redis" means this read worked. ``/live`` needs no Redis: a worker should
not be restarted because Redis is down, only when the process itself stopped answering.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core import keys

if TYPE_CHECKING:
    from django_wurk.core.connection import Redis

logger = logging.getLogger("django_wurk.health")

#: (healthy, one line saying why): what ``/live`` and ``/ready`` answer.
Verdict = tuple[bool, str]


def heartbeat_verdict(redis: Redis, identities: Sequence[str | bytes], window: float) -> Verdict:
    """Ready when every process in ``identities`` beat within ``window`` s and is not quiet.

    An identity read from Redis is passed as its bytes, so one that is not UTF-8 still
    names its own hash."""
    if not identities:
        return False, "no worker process has started yet"
    try:
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.hmget(
                identity if isinstance(identity, bytes) else keys.process(identity),
                "beat",
                "quiet",
                "concurrency",
                "threads",
            )
        replies = pipe.execute()
        now = float(redis.time()[0])
    except RedisError as exc:
        return False, f"Redis is unreachable: {exc}"
    for raw, (beat, quiet, concurrency, threads) in zip(identities, replies, strict=True):
        identity = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
        try:
            age = now - float(beat)
        except (TypeError, ValueError):
            return False, f"{identity}: no readable heartbeat"
        if not age <= window:
            return False, f"{identity}: last heartbeat {age:.0f} s ago (ready_window {window:g} s)"
        if quiet == b"true":
            return False, f"{identity}: quiet"
        short = _threads_short(concurrency, threads)
        if short:
            return False, f"{identity}: {short}"
    return True, f"{len(identities)} process(es) ready"


def _threads_short(concurrency: bytes | None, threads: bytes | None) -> str:
    """Why a process runs fewer processor threads than its ``concurrency``, or ``""``.

    A hash without ``threads`` (an older worker's) says nothing either way."""
    try:
        running, wanted = int(threads or b""), int(concurrency or b"")
    except ValueError:
        return ""
    return f"{running} of {wanted} processor threads running" if running < wanted else ""


class HealthServer:
    def __init__(
        self,
        bind: str,
        port: int,
        *,
        metrics: Callable[[], tuple[bytes, str]],
        live: Callable[[], Verdict],
        ready: Callable[[], Verdict],
    ) -> None:
        routes: dict[str, Callable[[], tuple[int, bytes, str]]] = {
            "/metrics": lambda: (200, *metrics()),
            "/live": lambda: verdict_response(live()),
            "/ready": lambda: verdict_response(ready()),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                if route is None:
                    status, body, kind = 404, b"not found: try /metrics, /live or /ready\n", "text/plain"
                else:
                    try:
                        status, body, kind = route()
                    except Exception as exc:  # a probe answers, whatever broke
                        logger.exception("health port: %s failed", self.path)
                        status, body, kind = 500, f"{type(exc).__name__}: {exc}\n".encode(), "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would drown the worker's own log

        try:
            self.server = _server_class(bind)((bind, port), Handler)
        except OSError as exc:
            raise OSError(f"HEALTH_PORT: cannot listen on {bind}:{port}: {exc}") from exc
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="wurk-health", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self.thread.start()
        logger.info("health port %d: /metrics, /live, /ready", self.port)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _server_class(bind: str) -> type[ThreadingHTTPServer]:
    """An IPv6 address (``::`` on an IPv6-only cluster) needs an IPv6 socket; anything else, IPv4."""
    return _IPv6Server if ":" in bind else ThreadingHTTPServer


def verdict_response(verdict: Verdict) -> tuple[int, bytes, str]:
    ok, why = verdict
    return (200 if ok else 503), f"{'ok' if ok else 'unavailable'}: {why}\n".encode(), "text/plain"
