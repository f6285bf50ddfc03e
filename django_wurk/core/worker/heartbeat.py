"""The heartbeat: tell Redis (and so Sidekiq's Web UI and API) that this process is alive.

Every beat flushes the in-memory stats, rewrites the busy-work hash, and refreshes the
process hash with a 60-second TTL, in Sidekiq's exact shape (Sidekiq 6.4.1
lib/sidekiq/launcher.rb; docs/interop.md). The same round trip pops one remote signal
from ``<identity>-signals`` (TSTP quiet, TERM stop, TTIN thread dump), which is how a Web
UI's Quiet and Stop buttons reach us.

Between beats, a *pulse* follows a job starting or ending within half a second: the same
writes without the PING or the per-class metrics, so the Busy page and the live graph
keep up with the work. Idle, there are no pulses.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from django_wurk.core import keys, version, wire
from django_wurk.core.worker.metrics_layouts import MetricsLayouts
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.stats import ONLY_8, ClassMetrics, Stats, queue_flush
from django_wurk.core.worker.work import WorkSet, WorkSets

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.heartbeat")

#: The commands that add the drained counts to Redis's counters (``stats.queue_flush``).
COUNTER_COMMANDS = frozenset({"INCRBY", "HINCRBY", "BITFIELD"})

#: The least time between two pulses: a job shows on the Busy page within about this.
PULSE_INTERVAL = 0.5


def rss_kb() -> int:
    """Resident set size in KB from /proc (0 where there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Heartbeat:
    def __init__(
        self,
        wurk: Wurk,
        identity: str,
        work: WorkSet | WorkSets,
        stats: Stats,
        outage: Outage,
        on_signal: Callable[[str], None],
        threads: Callable[[], int] | None = None,
        after_beat: Callable[[], None] = lambda: None,
    ) -> None:
        self.wurk = wurk
        self.config = wurk.config
        #: How many processor threads run now; written as ``threads`` beside ``concurrency``,
        #: so ``/ready`` fails while a process runs fewer than it was given.
        self.threads = threads if threads is not None else lambda: self.config.concurrency
        #: Called after each full beat reached Redis (the ``heartbeat`` event).
        self.after_beat = after_beat
        self.identity = identity
        self.work = work
        self.stats = stats
        self.outage = outage
        self.on_signal = on_signal
        self.started_at = time.time()
        self.stopping = threading.Event()
        self.quiet = False
        self.thread = threading.Thread(target=self.run, name="wurk-heartbeat", daemon=True)
        self._info = wire.dumps(self.info())
        self.layouts = MetricsLayouts(self.config.metrics_layout)
        #: Counters already reported as holding junk, so each is reported once.
        self._junk: set[tuple[str, ...]] = set()
        #: The last beat's PING round trip, reported by the pulses until the next beat.
        self._rtt_us = 0

    def info(self) -> dict[str, Any]:
        """The process hash's ``info``, as Sidekiq 7 writes it: one ``capsules`` entry per pool.

        ``concurrency`` is the total, ``queues`` the union, and ``weights`` one hash per
        capsule in the same order (a Sidekiq 6 Web UI reads the first).
        """
        config = self.config
        capsules = {}
        for capsule in config.capsule_list():
            weights = {q.name: q.weight for q in capsule.queues}
            mode = (
                "strict" if capsule.strict_order else "random" if set(weights.values()) == {1} else "weighted"
            )
            capsules[capsule.name] = {"concurrency": capsule.concurrency, "mode": mode, "weights": weights}
        return {
            "hostname": config.hostname,
            "started_at": self.started_at,
            "pid": os.getpid(),
            "tag": config.tag,
            "concurrency": config.concurrency,
            "queues": list(config.queue_names),
            "weights": [c["weights"] for c in capsules.values()],
            "capsules": capsules,
            "labels": list(config.labels),
            "identity": self.identity,
            "version": version.__version__,
            "embedded": False,
        }

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        """Beat every ``heartbeat_interval``; between beats, pulse soon after the busy set changes.

        An idle process (nothing starting or ending) only beats, as before. A busy one
        pulses at once on the first change, then at most every ``PULSE_INTERVAL`` however
        many jobs start and end meanwhile: one transaction, whatever the throughput.
        """
        changed = self.work.changed
        next_beat = time.monotonic() + self.config.heartbeat_interval
        last_pulse = -PULSE_INTERVAL
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self.beat()
                next_beat = time.monotonic() + self.config.heartbeat_interval
                continue
            if not changed.wait(next_beat - now):
                continue
            # Coalesce: the changes of the next moments go out with this one.
            hold = min(last_pulse + PULSE_INTERVAL, next_beat) - time.monotonic()
            if hold > 0 and self.stopping.wait(hold):
                break
            if time.monotonic() >= next_beat:
                continue  # the beat writes it all
            self.pulse()
            last_pulse = time.monotonic()

    def beat(self) -> None:
        """One heartbeat; Redis errors are logged once per outage and the counts kept for later."""
        if self._send(self.stats.drain(), full=True):
            self.after_beat()

    def pulse(self) -> None:
        """Between beats: the busy-work hash, the process's busy count and the two stat totals."""
        self._send(self.stats.drain_totals(), full=False)

    def _send(self, counts: tuple[Any, ...], full: bool) -> bool:
        """Write the beat (or pulse); True if it reached Redis."""
        try:
            self._beat(counts, full)
            self.outage.recovered()
            return True
        except RedisError as exc:
            self.stats.restore(*counts)
            self.outage.failed(exc)
        except Exception as exc:
            self.stats.restore(*counts)
            logger.exception("heartbeat failed")
            self.wurk.report_error(exc, {"context": "heartbeat"})
        return False

    def _beat(self, counts: tuple[int, int, dict[tuple[int, str], ClassMetrics]], full: bool = True) -> None:
        redis = self.wurk.redis
        identity = self.identity
        # Cleared before the snapshot: a job starting after it sets it again, for the next pulse.
        self.work.changed.clear()
        busy = self.work.snapshot()

        layouts = self.layouts.current(redis) if counts[2] else ONLY_8
        pipe = redis.pipeline(transaction=True)
        queue_flush(pipe, counts[0], counts[1], counts[2], layouts)
        work_keys = [keys.work(identity)]
        if self.config.legacy_workers_key:
            work_keys.append(keys.legacy_workers(identity))
        work = {
            tid: wire.dumps(
                {"queue": w.unit.queue, "payload": w.unit.raw.decode("utf-8", "replace"), "run_at": w.run_at}
            )
            for tid, w in busy.items()
        }
        for key in work_keys:
            pipe.unlink(key)
            if work:
                pipe.hset(key, mapping=work)
                pipe.expire(key, keys.PROCESS_TTL)
        if full:
            self._flush(pipe)
            started = time.perf_counter()
            redis.ping()
            self._rtt_us = int((time.perf_counter() - started) * 1_000_000)
            pipe = redis.pipeline(transaction=True)

        # A pulse writes the whole process hash too (with the last beat's round trip): the
        # Busy page's counts agree with its job list, and the hash always keeps its TTL.
        pipe.sadd(keys.PROCESSES, identity)
        pipe.hset(
            keys.process(identity),
            mapping={
                "info": self._info,
                "concurrency": self.config.concurrency,
                "threads": self.threads(),
                "busy": len(busy),
                "beat": repr(time.time()),
                "rtt_us": self._rtt_us,
                "quiet": "true" if self.quiet else "false",
                "rss": rss_kb(),
            },
        )
        pipe.expire(keys.process(identity), keys.PROCESS_TTL)
        pipe.rpop(keys.signals(identity))
        signal = self._flush(pipe)[-1]
        if signal:
            self.on_signal(signal.decode("utf-8", "replace"))

    def _flush(self, pipe: Any) -> list[Any]:
        """Run a transaction that adds counts to the counters, whatever a counter holds.

        A counter someone set to ``"abc"`` (or past 64 bits) refuses INCRBY. In a MULTI the
        other commands still run, but the error used to end the beat before the process hash
        was written: the worker looked dead, and would be reaped, while it ran. Such a
        counter is reported once (ERROR) and left as it is, for a person to repair; its
        counts are dropped rather than kept for a flush that would fail the same way. Any
        other error reply is raised as before.
        """
        commands = [args for args, _ in pipe.command_stack]
        replies: list[Any] = pipe.execute(raise_on_error=False)
        for args, reply in zip(commands, replies, strict=True):
            if not isinstance(reply, ResponseError):
                continue
            name = str(args[0]).upper()
            if name not in COUNTER_COMMANDS:
                raise reply
            counter = tuple(str(a) for a in args[1 : 3 if name == "HINCRBY" else 2])
            if counter in self._junk:
                continue
            self._junk.add(counter)
            logger.error(
                "counter %s cannot be added to (%s); it is left as it is and not updated until it "
                "is repaired (DEL it, or SET it to a number). Said once per process",
                " field ".join(counter),
                reply,
            )
        return replies

    def stop(self) -> None:
        """Final flush, then leave the process set; the process hash is left to expire (as Sidekiq does)."""
        self.stopping.set()
        self.work.changed.set()  # wakes a heartbeat waiting for work to change
        if self.thread.is_alive():
            self.thread.join(5)
        counts = self.stats.drain()
        try:
            layouts = self.layouts.current(self.wurk.redis) if counts[2] else ONLY_8
            pipe = self.wurk.redis.pipeline(transaction=True)
            queue_flush(pipe, counts[0], counts[1], counts[2], layouts)
            pipe.srem(keys.PROCESSES, self.identity)
            pipe.unlink(keys.work(self.identity), keys.legacy_workers(self.identity))
            self._flush(pipe)
        except RedisError as exc:
            logger.error("could not deregister %s from Redis at shutdown: %s", self.identity, exc)
