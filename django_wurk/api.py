"""The data API: read and change the jobs, sets and processes in Redis, as ``Sidekiq::*`` does.

This is the public name for it (docs/jobs.md, "The data API"); the code lives in the
engine, ``django_wurk.core.api``, which may change. It reads the same keys as Sidekiq's Web
UI, so Ruby and Python processes show alike, and it needs no Django: a script can use it
after ``wurk.configure(...)``.
"""

from django_wurk.core.api import (
    DeadSet,
    JobRecord,
    KilledByAPI,
    Process,
    ProcessSet,
    Queue,
    RetrySet,
    RunningJob,
    ScheduledSet,
    SortedEntry,
    SortedSet,
    Stats,
    Workers,
    parse_entry_key,
)
from django_wurk.core.features.batches import BatchSet, DeadBatchSet
from django_wurk.core.features.history import History, QueueGauge, Snapshot
from django_wurk.core.features.limiters import LimiterInfo, LimiterSet
from django_wurk.core.features.periodic import Loop, LoopFire, LoopSet, current_leader
from django_wurk.core.features.status import JobStatus
from django_wurk.core.features.unique import lock_owner as unique_lock_owner

__all__ = [
    "BatchSet",
    "DeadBatchSet",
    "DeadSet",
    "History",
    "JobRecord",
    "JobStatus",
    "KilledByAPI",
    "LimiterInfo",
    "LimiterSet",
    "Loop",
    "LoopFire",
    "LoopSet",
    "Process",
    "ProcessSet",
    "Queue",
    "QueueGauge",
    "RetrySet",
    "RunningJob",
    "ScheduledSet",
    "Snapshot",
    "SortedEntry",
    "SortedSet",
    "Stats",
    "Workers",
    "current_leader",
    "parse_entry_key",
    "unique_lock_owner",
]
