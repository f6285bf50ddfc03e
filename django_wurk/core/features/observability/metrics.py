"""The per-job Prometheus series, and the hooks that move them.

Counting happens where the outcome is known: a server middleware times every execution
(processed, failed, duration, busy threads), the retry and death hooks count what the retry
handler decided (and the failures that stop a job before the middleware: an unknown class,
an unreadable payload), and the process's ``Outage`` counts failed Redis round trips. The series of
one (class, queue) pair are looked up once and kept in a plain dict, so a job costs a dict
read, a clock read and the few locked additions prometheus-client makes; nothing else.

prometheus-client picks its value store when it is imported: in memory, or memory-mapped
files in ``PROMETHEUS_MULTIPROC_DIR`` when that is set (``runwurk -P N`` sets it before this
module is imported, so each child writes its own files and the supervisor adds them up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from django_wurk.core import wire
from django_wurk.core.engine import UnknownJobError
from django_wurk.core.events import Process
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: One registry for our series only: what ``/metrics`` shows in a single process.
REGISTRY = CollectorRegistry(auto_describe=True)
LABELS = ("class", "queue")
#: Distinct (class, queue) pairs a process keeps series for; later pairs share one, so a
#: flood of junk class names cannot grow a scrape (or the process) without bound.
MAX_SERIES = 1000
OVERFLOW_PAIR = ("(other)", "(other)")
#: Seconds: from a millisecond job to a five-minute one.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

processed = Counter(
    "wurk_jobs_processed", "Executions finished, failures included.", LABELS, registry=REGISTRY
)
failed = Counter("wurk_jobs_failed", "Executions that raised.", LABELS, registry=REGISTRY)
retried = Counter("wurk_jobs_retried", "Failed jobs written to the retry set.", LABELS, registry=REGISTRY)
dead = Counter("wurk_jobs_dead", "Jobs moved to the dead set.", LABELS, registry=REGISTRY)
duration = Histogram(
    "wurk_job_duration_seconds",
    "Time spent in perform, middleware included, failures included.",
    LABELS,
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
busy = Gauge(
    "wurk_busy_threads", "Job threads running a job now.", registry=REGISTRY, multiprocess_mode="livesum"
)
redis_errors = Counter(
    "wurk_redis_errors", "Redis round trips of the worker's loops that failed.", registry=REGISTRY
)


def label(value: str) -> str:
    """A label value the exposition can always write: a lone surrogate (a payload's bytes
    that were not UTF-8) becomes a ``\\udcff`` escape instead of failing the whole scrape."""
    if value.isascii():
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


class Series:
    """The children of one (class, queue) pair, so a job never goes through ``labels()``."""

    __slots__ = ("duration", "failed", "processed")

    def __init__(self, job_class: str, queue: str) -> None:
        self.processed = processed.labels(job_class, queue)
        self.failed = failed.labels(job_class, queue)
        self.duration = duration.labels(job_class, queue)


_labels: dict[tuple[str, str], tuple[str, str]] = {}
_series: dict[tuple[str, str], Series] = {}


def labels(job_class: str, queue: str) -> tuple[str, str]:
    """The label values for a pair; past ``MAX_SERIES`` pairs, the shared overflow pair."""
    found = _labels.get((job_class, queue))
    if found is None:
        if len(_labels) >= MAX_SERIES:
            return OVERFLOW_PAIR
        found = _labels[(job_class, queue)] = (label(job_class), label(queue))
    return found


def series(job_class: str, queue: str) -> Series:
    found = _series.get((job_class, queue))
    if found is None:
        pair = labels(job_class, queue)
        key = OVERFLOW_PAIR if pair is OVERFLOW_PAIR else (job_class, queue)
        found = _series.get(key)
        if found is None:
            found = _series[key] = Series(*pair)
    return found


class JobMetrics:
    """Server middleware, outermost: times the whole execution and counts its outcome.

    A hard shutdown (a ``BaseException``) pushes the job back rather than failing it, so it
    counts as neither processed nor failed.
    """

    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        s = series(wire.job_display_class(payload), queue)
        busy.inc()
        started = time.perf_counter()
        try:
            call_next()
        except Exception:
            s.failed.inc()
            s.processed.inc()
            s.duration.observe(time.perf_counter() - started)
            raise
        else:
            s.processed.inc()
            s.duration.observe(time.perf_counter() - started)
        finally:
            busy.dec()


def _queue_of(payload: Payload) -> str:
    queue = payload.get("queue")
    return queue if isinstance(queue, str) else "?"


#: Failures that happen before the server middleware, so ``JobMetrics`` never sees them: a
#: class no one registered, a payload that is not a job (buried as unreadable). The retry and
#: death hooks count them as processed and failed, as Sidekiq's ``stat:failed`` does.
BEFORE_MIDDLEWARE = (UnknownJobError, wire.PayloadError)


def _count_unseen_failure(pair: tuple[str, str], exc: BaseException) -> None:
    if isinstance(exc, BEFORE_MIDDLEWARE):
        processed.labels(*pair).inc()
        failed.labels(*pair).inc()


def count_retry(payload: Payload, exc: BaseException) -> None:
    pair = labels(wire.job_display_class(payload), _queue_of(payload))
    _count_unseen_failure(pair, exc)
    retried.labels(*pair).inc()


def count_death(payload: Payload, exc: BaseException) -> None:
    """Death handlers hear discarded and retry-less jobs too: only a burial counts as dead.

    A failure the middleware did not see counts as failed even when it is not buried (an
    unknown class with ``retry=False``): it failed all the same. The retry handler calls
    exactly one of the two hooks once per failure, so it is counted once.
    """
    pair = labels(wire.job_display_class(payload), _queue_of(payload))
    _count_unseen_failure(pair, exc)
    if "discarded_at" in payload or "error_class" not in payload:
        return
    dead.labels(*pair).inc()


def count_redis_error(exc: BaseException) -> None:
    redis_errors.inc()


def _count_redis_errors(process: Process) -> None:
    process.outage.listeners.append(count_redis_error)


def plug(wurk: Wurk) -> Plug:
    """Every execution counted and timed, retries and deaths counted, Redis errors counted."""
    return Plug(
        server=JobMetrics(),
        on_retry=count_retry,
        on_death=count_death,
        events={"startup": _count_redis_errors},
    )


#: Prometheus' counting, around the built-in features: a rate-limited job counts once it runs.
FEATURE = Feature("metrics", plug, server_place=Place(outside=("limiters",)))
