"""Fixtures for the dashboard tests: users with and without each permission, and job data.

Data goes into Redis the way workers and clients write it (``wire.dumps`` payloads, the
real metrics flush), so the pages are tested against Sidekiq-shaped keys.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from django_wurk import Wurk
from django_wurk.core import keys, wire
from django_wurk.core.worker.stats import Stats, queue_flush

PERMS = {"view": "view_dashboard", "manage": "manage_jobs"}


def url(page: str, /, **kwargs: Any) -> str:
    return reverse(f"admin:django_wurk_dashboard_{page}", kwargs=kwargs or None)


def make_user(username: str, *perms: str, staff: bool = True) -> User:
    user = User.objects.create_user(username, password="pw-" + username, is_staff=staff)
    for perm in perms:
        user.user_permissions.add(
            Permission.objects.get(codename=PERMS[perm], content_type__app_label="django_wurk")
        )
    return User.objects.get(pk=user.pk)  # fresh, so the permission cache is empty


@pytest.fixture
def login(db: None) -> Callable[..., Client]:
    """``login("view", "manage")``: a client logged in as a staff user with those permissions;
    ``login(staff=False)`` a non-staff user; ``login(superuser=True)`` a superuser."""
    counter = iter(range(1000))

    def make(*perms: str, staff: bool = True, superuser: bool = False) -> Client:
        name = f"user{next(counter)}"
        if superuser:
            user = User.objects.create_superuser(name, password="pw")
        else:
            user = make_user(name, *perms, staff=staff)
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def viewer(login: Callable[..., Client], wurk: Wurk) -> Client:
    return login("view")


@pytest.fixture
def manager(login: Callable[..., Client], wurk: Wurk) -> Client:
    return login("view", "manage")


def payload(job_class: str = "app.jobs.Hello", args: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    now = time.time()
    data: dict[str, Any] = {
        "class": job_class,
        "args": [1, "two"] if args is None else args,
        "retry": True,
        "queue": "default",
        "jid": wire.new_jid(),
        "created_at": now - 100,
        "enqueued_at": now - 90,
    }
    data.update(extra)
    return data


def failed(job_class: str = "app.jobs.Broken", **extra: Any) -> dict[str, Any]:
    """A payload as the retry and dead sets hold it (error fields and an encoded backtrace)."""
    data = payload(job_class, extra.pop("args", None))
    data.update(
        error_class="ValueError",
        error_message="it broke",
        failed_at=time.time() - 80,
        retry_count=1,
        error_backtrace=wire.encode_backtrace(["app/jobs.py:12:in `perform'", "lib/run.py:3:in `call'"]),
    )
    data.update(extra)
    return data


def push(r: Any, data: dict[str, Any], queue: str = "default") -> bytes:
    raw = wire.dumps(data).encode()
    r.sadd(keys.QUEUES, queue)
    r.lpush(keys.queue(queue), raw)
    return raw


def zadd(r: Any, key: str, data: dict[str, Any], score: float | None = None) -> str:
    """Add to a sorted set; returns the entry key ``<score>-<jid>``."""
    score = time.time() + 60 if score is None else score
    r.zadd(key, {wire.dumps(data): score})
    return f"{score!r}-{data['jid']}"


def add_process(r: Any, identity: str = "web1:123:abcdef012345", busy_jobs: int = 1, **info: Any) -> str:
    now = time.time()
    base = {
        "hostname": identity.split(":")[0],
        "pid": int(identity.split(":")[1]),
        "started_at": now - 3600,
        "tag": "shop",
        "concurrency": 5,
        "queues": ["default", "critical"],
        "labels": ["canary"],
        "identity": identity,
    }
    base.update(info)
    r.sadd(keys.PROCESSES, identity)
    r.hset(
        identity,
        mapping={
            "info": json.dumps(base),
            "busy": busy_jobs,
            "beat": now,
            "quiet": "false",
            "rss": 54321,
            "rtt_us": 120,
            "concurrency": 5,
        },
    )
    for i in range(busy_jobs):
        job = payload("app.jobs.Running", [i])
        r.hset(
            keys.work(identity),
            f"tid{i}",
            json.dumps({"queue": "default", "payload": wire.dumps(job), "run_at": int(now) - 5}),
        )
    return identity


def write_metrics(r: Any, job_class: str = "app.jobs.Hello", runs: int = 5, failures: int = 1) -> None:
    stats = Stats()
    now = time.time()
    for i in range(runs):
        stats.record(job_class, 25.0 + i * 100, failed=i < failures, at=now)
    pipe = r.pipeline(transaction=False)
    queue_flush(pipe, *stats.drain())
    pipe.execute()
