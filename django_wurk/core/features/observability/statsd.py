"""StatsD, under Sidekiq Pro's metric names, for shops whose dashboards already chart them.

A server middleware sends, per job, one UDP datagram holding DogStatsD lines (tags after
``|#``): ``<prefix>.jobs.count``, ``.success`` or ``.failure``, and ``.perform`` (a timing
in ms), tagged ``worker:<class>`` and ``queue:<queue>`` as Sidekiq Pro tags them; the retry
hook sends ``<prefix>.jobs.retried``. UDP is fire-and-forget: a full buffer or an absent
agent drops the datagram, never slows or fails a job.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.statsd")

#: Characters that would end a DogStatsD line, its tag list or a tag.
_UNSAFE = str.maketrans({c: "_" for c in "|,#\n\r@"})


def tag(value: str) -> str:
    return value.encode("utf-8", "backslashreplace").decode("utf-8").translate(_UNSAFE)


class Statsd:
    """A UDP sender to one agent; the address is resolved once, at start-up."""

    def __init__(self, host: str, port: int, prefix: str = "sidekiq") -> None:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        self.address = address
        self.prefix = prefix
        self.sock = socket.socket(family, kind, proto)
        self.sock.setblocking(False)
        self._tags: dict[tuple[str, str], str] = {}

    def tags(self, job_class: str, queue: str) -> str:
        found = self._tags.get((job_class, queue))
        if found is None:
            found = f"|#worker:{tag(job_class)},queue:{tag(queue)}"
            if len(self._tags) < 1000:  # junk class names must not grow this without bound
                self._tags[(job_class, queue)] = found
        return found

    def send(self, lines: str) -> None:
        try:  # noqa: SIM105 - per job: a plain try costs less than contextlib.suppress
            self.sock.sendto(lines.encode("utf-8"), self.address)
        except OSError:
            pass  # no agent, or its buffer is full: metrics are not worth a job's time


class StatsdMiddleware:
    def __init__(self, statsd: Statsd) -> None:
        self.statsd = statsd

    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        started = time.perf_counter()
        try:
            call_next()
        except Exception:
            self._send(payload, queue, started, "failure")
            raise
        self._send(payload, queue, started, "success")  # a hard shutdown (BaseException) sends nothing

    def _send(self, payload: Payload, queue: str, started: float, outcome: str) -> None:
        s = self.statsd
        tags = s.tags(wire.job_display_class(payload), queue)
        ms = (time.perf_counter() - started) * 1000
        p = s.prefix
        s.send(f"{p}.jobs.count:1|c{tags}\n{p}.jobs.{outcome}:1|c{tags}\n{p}.jobs.perform:{ms:.3f}|ms{tags}")


def install(wurk: Wurk, statsd: Statsd) -> None:
    """Send ``wurk``'s job counts and timings to ``statsd``; installing again replaces it."""
    wurk.server_middleware.prepend(StatsdMiddleware, statsd)

    def statsd_retried(payload: Payload, exc: BaseException) -> None:
        queue = payload.get("queue")
        tags = statsd.tags(wire.job_display_class(payload), queue if isinstance(queue, str) else "?")
        statsd.send(f"{statsd.prefix}.jobs.retried:1|c{tags}")

    statsd_retried.statsd = True  # type: ignore[attr-defined]
    wurk.retry_handlers[:] = [h for h in wurk.retry_handlers if not getattr(h, "statsd", False)]
    wurk.retry_handlers.append(statsd_retried)
