"""Every Redis key django-wurk reads or writes is named here, and only here.

The names are Sidekiq's own (no prefix), so Ruby processes, Sidekiq's Web UI and our
workers share one keyspace. Keeping them in one module means a reader can audit our
whole footprint in Redis at a glance, and a future namespace option has one place to go.
"""

from __future__ import annotations

from datetime import datetime

QUEUES = "queues"
SCHEDULE = "schedule"
RETRY = "retry"
DEAD = "dead"
PROCESSES = "processes"
PROCESS_CLEANUP = "process_cleanup"
#: The leader election's key unless ``LEADER_KEY`` says otherwise (``Config.leader_key``): our
#: own, so a Python fleet never takes the key Sidekiq Enterprise's election holds.
LEADER = "wurk-leader"
#: Sidekiq Enterprise's leader key: Ruby's ``ProcessSet#leader`` and Busy page read it, and
#: Enterprise's leader-only work (periodic jobs, its metrics) runs where it names a Ruby process.
ENTERPRISE_LEADER = "dear-leader"
PAUSED = "paused"
STAT_PROCESSED = "stat:processed"
STAT_FAILED = "stat:failed"
#: Jobs skipped because their ``expires_at`` had passed (expiring jobs; no Sidekiq key reads it).
STAT_EXPIRED = "stat:expired"

#: TTL of the daily stat keys: five years, as Sidekiq sets it on every flush.
DAILY_STAT_TTL = 157_680_000
#: TTL of a process hash, its busy-work hash and its signal list.
PROCESS_TTL = 60
#: Minutely metrics live 8 hours, the ten-minute rollups 3 days (Sidekiq 8; Sidekiq 7.x keeps
#: its minutely hashes and histograms 8 hours too, and no rollup).
METRICS_MINUTE_TTL = 28_800
METRICS_ROLLUP_TTL = 259_200


def queue(name: str) -> str:
    return f"queue:{name}"


def daily_stat(kind: str, day: str) -> str:
    """``stat:processed:2026-11-29``; ``kind`` is ``processed``, ``failed`` or ``expired``,
    ``day`` a UTC ISO date."""
    return f"stat:{kind}:{day}"


def process(identity: str) -> str:
    return identity


def work(identity: str) -> str:
    """The busy-work hash (tid -> running job) read by Sidekiq 6.4.2+ Web UIs."""
    return f"{identity}:work"


def legacy_workers(identity: str) -> str:
    """The same hash under Sidekiq <= 6.4.1's name, written only when asked for."""
    return f"{identity}:workers"


def signals(identity: str) -> str:
    return f"{identity}-signals"


def metrics_minute(at: datetime) -> str:
    """``j|YYMMDD|H:MM`` — Sidekiq 8's per-minute execution metrics hash (UTC)."""
    return f"j|{at:%y%m%d}|{at.hour}:{at.minute:02d}"


def metrics_rollup(at: datetime) -> str:
    """``j|YYMMDD|H:M`` — the ten-minute rollup: the minute's last digit dropped."""
    return f"j|{at:%y%m%d}|{at.hour}:{at.minute // 10}"


def histogram(job_class: str, at: datetime) -> str:
    """``h|<class>-<day>-<hour>:<minute>`` with nothing zero-padded (Sidekiq 8)."""
    return f"h|{job_class}-{at.day}-{at.hour}:{at.minute}"


def metrics_minute_v7(at: datetime) -> str:
    """``j|YYYYMMDD|H:M`` — Sidekiq 7.x's per-minute metrics hash (UTC, hour and minute
    unpadded: ``j|20261203|9:5``); 7.x keeps no rollup."""
    return f"j|{at:%Y%m%d}|{at.hour}:{at.minute}"


def histogram_v7(job_class: str, at: datetime) -> str:
    """``<class>-DD-HH:M`` — Sidekiq 7.x's histogram: no prefix, day and hour zero-padded,
    the minute not (``Rb::Echo-03-09:5``)."""
    return f"{job_class}-{at:%d}-{at:%H}:{at.minute}"


def metrics_copies(at: datetime) -> str:
    """The counts of one minute that a worker writing both layouts copied into Sidekiq 7's
    hash (ours alone, no Sidekiq reads it): a reader of both layouts subtracts them, so a
    job is counted once."""
    return f"wurk-metrics-copied|{at:%y%m%d}|{at.hour}:{at.minute:02d}"


def histogram_copies(job_class: str, at: datetime) -> str:
    """The executions a worker writing both layouts copied into Sidekiq 7's histogram."""
    return f"wurk-metrics-copied|h|{job_class}-{at.day}-{at.hour}:{at.minute}"


#: Exclusive upper bounds (ms) of a histogram's buckets; the last bucket is unbounded. Part
#: of the key's layout (one counter per bucket, in this order), which the writer
#: (``worker.stats``) and the reader (``metrics``) must agree on, as Sidekiq 8's do.
HISTOGRAM_BOUNDS = (
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1100, 1700, 2500, 3800,
    5750, 8500, 13000, 20000, 30000, 45000, 65000, 100000, 150000, 225000, 335000,
)  # fmt: skip


#: A lease held by the one outbox relay running at a time across all workers.
OUTBOX_RELAY_LOCK = "wurk-outbox-relay"
#: How long an outbox row's "already pushed" marker lives: far longer than any relay delay.
OUTBOX_MARKER_TTL = 7 * 24 * 3600


def outbox_marker(scope: str, token: str) -> str:
    """Set when the outbox row with ``token`` (never reused) of database ``scope`` was pushed,
    so it is pushed once."""
    return f"wurk-outbox:{scope}:{token}"


def task_result(jid: str) -> str:
    """The ``django.tasks`` result record of one task run (a hash with a TTL)."""
    return f"wurk-task-result:{jid}"


#: Sidekiq Pro's private-list naming, so a mixed fleet recognises in-progress jobs.
PRIVATE_QUEUE_PREFIX = "queue:sq|"


def cap_holders(queue_name: str) -> str:
    """The set of private lists that hold (or held) jobs of the capped queue ``queue_name``
    (``WURK["QUEUE_CAPS"]``): the fetch counts the jobs in them against the cap."""
    return f"wurk-cap-holders:{queue_name}"


#: A lease held by the one reaper running at a time across the cluster.
REAPER_LOCK = "wurk-reaper"


def private_queue(identity: str, queue_name: str) -> str:
    """``queue:sq|<identity>|<queue>``: jobs one process has fetched and not yet finished."""
    return f"{PRIVATE_QUEUE_PREFIX}{identity}|{queue_name}"


def parse_private_queue(key: str) -> tuple[str, str] | None:
    """(identity, queue) from a private-list key, or None if it is not one."""
    if not key.startswith(PRIVATE_QUEUE_PREFIX):
        return None
    identity, sep, queue_name = key[len(PRIVATE_QUEUE_PREFIX) :].rpartition("|")
    return (identity, queue_name) if sep and identity and queue_name else None


#: The lease one Celery-broker drain holds at a time, in the *broker's* Redis (beside the
#: lists it takes messages from), so two drains never resume each other's messages.
CELERY_DRAIN_LOCK = "wurk-celery-drain"
#: How long a drained message's "already pushed" marker lives in wurk's Redis: far longer
#: than a killed drain stays down before it is restarted and resumes the message it held.
CELERY_DRAIN_MARKER_TTL = 7 * 24 * 3600


def celery_drain_held(queue_name: str) -> str:
    """The broker list holding the message a drain took from Celery queue ``queue_name`` and
    has not finished yet (moved there atomically, removed once the job is in wurk's Redis)."""
    return f"wurk-celery-drain:held:{queue_name}"


def celery_drain_marker(delivery: str) -> str:
    """Set, in wurk's Redis, once the broker message ``delivery`` (kombu's per-publish
    delivery tag) was pushed as a job, so a drain resuming it never pushes it twice."""
    return f"wurk-celery-drain:pushed:{delivery}"


#: Jobs cancelled (``django_wurk.cancel``): removed before they ran, stopped at their start,
#: or stopped while running. Ours, as ``stat:expired`` is: no Sidekiq reader knows it, so
#: none misreads it (Sidekiq's Web UI reads ``stat:processed`` and ``stat:failed`` only).
STAT_CANCELLED = "stat:cancelled"
#: The field of ``iteration_state`` that says a job is cancelled: epoch seconds (an integer,
#: as text), written once (``HSETNX``), exactly as Sidekiq 7.3's ``Iterable#cancel!`` writes it.
CANCELLED_FIELD = "cancelled"
#: The iterable-job cursor field of the same hash (JSON; ``null`` before the first run).
ITERATION_CURSOR_FIELD = "c"
#: A field of ours in the same hash: set when a worker (or ``cancel``'s own recording of a
#: removed job) ended the job cancelled, so a ``cancel`` whose look came after that still
#: knows it found the job. Sidekiq reads only its own fields of the hash and ignores this one.
CANCEL_ENDED_FIELD = "wurk-ended"
#: How long an ``it-<jid>`` hash lives after its last write: Sidekiq's ``Iterable::STATE_TTL``
#: (one month), so a Ruby iterable job and ours keep the flag as long.
ITERATION_STATE_TTL = 30 * 24 * 3600
#: Ours: the jids cancelled lately, scored by the time of the cancel. Every worker process
#: reads what is new in it every ``cancel.watcher.LOOK_EVERY`` seconds, so a job start
#: checks a set in memory instead of paying a round trip for its flag.
RECENT_CANCELS = "wurk-cancels"
#: How long a jid stays in ``RECENT_CANCELS`` (seconds); the flag itself lives on.
RECENT_CANCELS_KEPT = 24 * 3600


def iteration_state(jid: str) -> str:
    """``it-<jid>``: Sidekiq 7.3's iterable-job state hash (cursor, times, ``cancelled``).

    Its ``cancelled`` field is the one cancel flag of every job, iterable or not, so a Ruby
    ``cancel!`` and ``django_wurk.cancel`` agree and each side's workers honour the other's.
    """
    return f"it-{jid}"
