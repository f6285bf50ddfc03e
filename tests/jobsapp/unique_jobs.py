"""Unique jobs the tests run in real workers (imported by the app, so ``runwurk``
subprocesses know them too). Each records, in Redis, what it saw while it ran."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django_wurk import Job, job, wurk
from django_wurk.api import unique_lock_owner


def record(name: str, value: Any) -> None:
    wurk.redis.rpush(f"seen:{name}", json.dumps(value))


def runs(name: str) -> list[Any]:
    return [json.loads(x) for x in wurk.redis.lrange(f"seen:{name}", 0, -1)]


@job(unique_for=600)
def sync_address(user_id: int) -> None:
    """Records the lock's owner as seen from inside perform (held until success)."""
    record("sync_address", [user_id, unique_lock_owner(sync_address, [user_id])])


@job(unique_for=600, unique_until="start")
def refresh_feed(user_id: int) -> None:
    """Released before perform: a push made during perform passes."""
    owner = unique_lock_owner(refresh_feed, [user_id])
    again = refresh_feed.perform_in(3600, user_id)
    record("refresh_feed", [user_id, owner, again])


@job(unique_for=600, retry=3)
def flaky_unique(n: int) -> None:
    """Fails its first attempt (retried a second later), then succeeds."""
    if wurk.redis.incr(f"flaky_unique:{n}") == 1:
        raise RuntimeError(f"flaky {n}")
    record("flaky_unique", n)


def _soon(count: int, exc: BaseException) -> int:
    return 1


flaky_unique.job_class.retry_in_hook = staticmethod(_soon)


@job(unique_for=600, retry=0)
def dies_unique(n: int) -> None:
    raise RuntimeError(f"dies {n}")


class NightlyReport(Job):
    queue = "reports"
    unique_for = timedelta(minutes=10)  # a class attribute, like queue

    def perform(self, day: str) -> None:
        record("nightly_report", day)


@job(wire_name="UniqueRailsJob", activejob=True, unique_for=60)
def unique_rails_job(n: int, label: str) -> None:
    record("unique_rails_job", [n, label])
