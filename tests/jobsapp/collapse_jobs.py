"""Debounced, throttled and deadlined jobs the tests run in real workers (imported by the
app, so ``runwurk`` subprocesses know them too). Each records, in Redis, what it ran with."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from django_wurk import job, wurk


def record(name: str, value: Any) -> None:
    wurk.redis.rpush(f"seen:{name}", json.dumps(value))


def runs(name: str) -> list[Any]:
    return [json.loads(x) for x in wurk.redis.lrange(f"seen:{name}", 0, -1)]


@job(debounce=0.5, debounce_max=30)
def reindex(user_id: int) -> None:
    """Debounced on its arguments: a burst of one user's pushes runs once."""
    record("reindex", user_id)


@job(debounce=0.5, debounce_max=30, collapse_key="search")
def rebuild_search(note: str) -> None:
    """Debounced on a key: a burst runs once, with the last push's arguments."""
    record("rebuild_search", note)


@job(debounce=3600, debounce_max=7200)
def waits_an_hour(user_id: int, note: str = "") -> None:
    record("waits_an_hour", [user_id, note])


@job(debounce=3600, collapse_key="notes")
def keyed_an_hour(note: str) -> None:
    record("keyed_an_hour", note)


@job(throttle=100_000_000)
def ping(user_id: int) -> None:
    """Throttled in a slot of about three years: one push is admitted, in any test."""
    record("ping", user_id)


@job(throttle=100_000_000, collapse_key="pong")
def pong(note: str) -> None:
    record("pong", note)


@job(debounce=0.3, retry=0)
def debounced_slow(tag: str, seconds: float) -> None:
    """Records its start (with its process), runs ``seconds``, records that it finished."""
    record("debounced_slow:started", [tag, os.getpid()])
    time.sleep(seconds)
    record("debounced_slow:done", tag)


@job(throttle=100_000_000, retry=0)
def throttled_slow(tag: str, seconds: float) -> None:
    record("throttled_slow:started", [tag, os.getpid()])
    time.sleep(seconds)
    record("throttled_slow:done", tag)


@job(deadline=600, retry=5)
def before_the_deadline(n: int) -> None:
    """Fails while ``deadline:fail:<n>`` is set; records each run that got through."""
    if wurk.redis.exists(f"deadline:fail:{n}"):
        record("before_the_deadline:failed", n)
        raise RuntimeError(f"not yet {n}")
    record("before_the_deadline", n)
