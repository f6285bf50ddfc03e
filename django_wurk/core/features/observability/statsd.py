"""StatsD, under Sidekiq Pro's metric names, for shops whose dashboards already chart them.

A server middleware sends, per job, one UDP datagram holding DogStatsD lines (tags after
``|#``): ``<prefix>.jobs.count``, ``.success`` or ``.failure``, and ``.perform`` (a timing
in ms), tagged ``worker:<class>`` and ``queue:<queue>`` as Sidekiq Pro tags them; the retry
hook sends ``<prefix>.jobs.retried``. UDP is fire-and-forget: a full buffer or an absent
agent drops the datagram, never slows or fails a job.

The fleet's gauges (``<prefix>.processed``, ``.failures``, ``.enqueued``, ``.retries``,
``.scheduled``, ``.dead``, ``.busy``, ``.processes``, and per queue ``.queue.size`` and
``.queue.latency`` tagged ``queue:``) describe Redis, not a process: they are a leader duty
(``core/features/periodic/duties.py``), so the one process that leads sends each every
``gauge_interval`` seconds and the fleet does not send them once per process. The queues
are read as the Prometheus scrape reads them (``reading``: the first 100, one pipeline).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: Seconds between two sendings of the gauges (Sidekiq's heartbeat interval).
DEFAULT_GAUGE_INTERVAL = 10.0
#: Bytes per datagram: under a common path MTU, so no agent sees a fragment.
DATAGRAM_BYTES = 1400
DUTY = "statsd-gauges"
#: Characters of a queue name kept in a gauge's tag, so every gauge fits a datagram.
MAX_TAG = 200

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


def datagrams(lines: list[str]) -> list[str]:
    """Lines packed into datagrams of at most ``DATAGRAM_BYTES`` (a longer line goes alone)."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        length = len(line.encode("utf-8")) + 1
        if current and size + length > DATAGRAM_BYTES:
            out.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += length
    if current:
        out.append("\n".join(current))
    return out


class StatsdGauges:
    """The leader's duty: the fleet's gauges, every ``interval`` seconds while it leads."""

    name = DUTY

    def __init__(self, wurk: Wurk, statsd: Statsd, interval: float) -> None:
        self.wurk = wurk
        self.statsd = statsd
        self.interval = interval
        self._next = float("-inf")

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.interval
        for datagram in datagrams(self.lines()):
            self.statsd.send(datagram)

    def lines(self) -> list[str]:
        from django_wurk.core.features.observability import reading

        redis = self.wurk.redis
        found, fleet = reading.read(redis), reading.totals(redis)
        p = self.statsd.prefix
        totals = {
            "processed": fleet.processed,
            "failures": fleet.failed,
            "enqueued": fleet.enqueued,
            "retries": found.retry,
            "scheduled": found.scheduled,
            "dead": found.dead,
            "busy": fleet.busy,
            "processes": fleet.processes,
        }
        lines = [f"{p}.{name}:{value}|g" for name, value in totals.items()]
        for queue in found.shown:
            tags = f"|#queue:{tag(queue.name[:MAX_TAG])}"
            lines.append(f"{p}.queue.size:{queue.size}|g{tags}")
            lines.append(f"{p}.queue.latency:{queue.latency:.3f}|g{tags}")
        return lines


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


def feature(statsd: Statsd, gauge_interval: float = DEFAULT_GAUGE_INTERVAL) -> Feature:
    """Send job counts and timings to ``statsd``, and (from the fleet's leader) its gauges
    every ``gauge_interval`` seconds."""
    from django_wurk.core.features.periodic.duties import while_leading

    if not (isinstance(gauge_interval, (int, float)) and 0 < gauge_interval < float("inf")):
        raise ValueError(f"the StatsD gauge interval must be seconds above 0, got {gauge_interval!r}")

    def statsd_retried(payload: Payload, exc: BaseException) -> None:
        queue = payload.get("queue")
        tags = statsd.tags(wire.job_display_class(payload), queue if isinstance(queue, str) else "?")
        statsd.send(f"{statsd.prefix}.jobs.retried:1|c{tags}")

    def plug(wurk: Wurk) -> Plug:
        return Plug(
            server=StatsdMiddleware(statsd),
            on_retry=statsd_retried,
            events=while_leading(
                wurk, lambda engine, identity: StatsdGauges(engine, statsd, float(gauge_interval))
            ),
        )

    # Around the built-in features, as Prometheus' counting: a rate-limited job counts once it runs.
    return Feature("statsd", plug, server_place=Place(outside=("limiters",)))
