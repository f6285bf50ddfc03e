"""ActiveJob: Rails' wrapper payloads reach a Python job, and Python enqueues what Rails runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import Queue
from django_wurk.core import wire
from django_wurk.core.activejob import RAILS_WRAPPER, SIDEKIQ_WRAPPER
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import ruby_seen
from tests.jobsapp import activejob_jobs
from tests.vectors import raw


@pytest.fixture
def python_worker(wurk: Wurk, test_config: Any) -> Iterator[Launcher]:
    from django_wurk.core.config import QueueSpec

    queues = (QueueSpec("mailers"), QueueSpec("vectors_aj"), QueueSpec("default"))
    wurk.configure(test_config.replace(queues=queues))
    worker = Launcher(wurk)
    worker.start()
    yield worker
    worker.stop()


def hello_seen(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange("seen:HelloJob", 0, -1)]


def test_rails_perform_later_reaches_the_python_job_with_arguments_decoded(
    activejob: None, rb: Callable[..., Any], r: Any, python_worker: Launcher
) -> None:
    rb(op="activejob_rich")
    [stored] = [json.loads(x) for x in r.lrange("queue:mailers", 0, -1)] or [None]
    wait_for(lambda: hello_seen(r), timeout=15)
    assert hello_seen(r) == [
        {
            # Symbol keys become strings; the keyword-arguments hash becomes Python kwargs.
            "args": ["world", {"count": 2, "plain": [1, {"nested": True}]}],
            "kwargs": {"mode": "fast", "retries": 3},
        }
    ]
    assert stored is None or stored["class"] == RAILS_WRAPPER


def test_the_real_rails_61_vector_runs(r: Any, python_worker: Launcher) -> None:
    """tests/vectors/queue_job_activejob.json, as Ruby Sidekiq 6.4.1 + ActiveJob 6.1 stored it."""
    r.lpush("queue:vectors_aj", raw("queue_job_activejob.json"))
    wait_for(lambda: r.llen("seen:MyRailsJob"), timeout=15)
    assert json.loads(r.lindex("seen:MyRailsJob", 0)) == ["aj", 2, {}]


def test_sidekiq_8_wrapper_name_and_globalid(r: Any, python_worker: Launcher) -> None:
    """A composed Sidekiq 8 ActiveJob payload: its wrapper name, int-ms times, a GlobalID argument."""
    payload = {
        "retry": True,
        "queue": "mailers",
        "class": SIDEKIQ_WRAPPER,
        "wrapped": "HelloJob",
        "args": [
            {
                "job_class": "HelloJob",
                "job_id": "5e0c2d9a-8f3b-4c1e-9d7a-2b6f1e0a3c4d",
                "provider_job_id": None,
                "queue_name": "mailers",
                "priority": None,
                "arguments": [
                    {"_aj_globalid": "gid://app/User/1"},
                    {"count": 2, "_aj_symbol_keys": ["count"]},
                    {"_aj_serialized": "ActiveJob::Serializers::SymbolSerializer", "value": "urgent"},
                    {"k": "v", "_aj_hash_with_indifferent_access": True},
                ],
                "executions": 0,
                "exception_executions": {},
                "locale": "en",
                "timezone": "UTC",
                "enqueued_at": "2026-01-01T00:00:00.123456789Z",
                "scheduled_at": None,
            }
        ],
        "jid": "c0ffee00c0ffee00c0ffee00",
        "created_at": int(time.time() * 1000),
        "enqueued_at": int(time.time() * 1000),
    }
    r.lpush("queue:mailers", wire.dumps(payload))
    wait_for(lambda: hello_seen(r), timeout=15)
    assert hello_seen(r) == [{"args": ["gid://app/User/1", {"count": 2}, "urgent", {"k": "v"}], "kwargs": {}}]
    # The dashboards' view of the same payload shows the job and its decoded arguments.
    r.lpush("queue:parked", wire.dumps(payload))
    [record] = Queue("parked").page()
    assert record.job_class == "HelloJob"
    assert record.display_args == ["gid://app/User/1", {"count": 2}, "urgent", {"k": "v"}]


def test_python_enqueues_what_rails_runs(
    activejob: None, rb: Callable[..., Any], r: Any, ruby_worker: Callable[..., Any]
) -> None:
    jid = activejob_jobs.hello.perform_async("from python", {"count": 2, "nested": {"deep": [1, None]}})
    [stored] = [json.loads(x) for x in r.lrange("queue:mailers", 0, -1)]
    assert stored["class"] == RAILS_WRAPPER and stored["wrapped"] == "HelloJob" and stored["jid"] == jid
    data = stored["args"][0]
    assert data["job_class"] == "HelloJob" and data["queue_name"] == "mailers" and data["executions"] == 0
    ruby_worker("mailers")
    wait_for(lambda: ruby_seen(r), timeout=30)
    [seen] = ruby_seen(r)
    assert seen["class"] == "HelloJob" and seen["jid"] == data["job_id"]
    # Rails decoded our hashes back to string-keyed hashes, as it would its own.
    assert seen["args"] == ["from python", {"count": 2, "nested": {"deep": [1, None]}}]


def test_reserved_activejob_keys_are_refused_at_enqueue(wurk: Wurk) -> None:
    with pytest.raises(TypeError, match="_aj_globalid"):
        activejob_jobs.hello.perform_async({"_aj_globalid": "gid://x"})


# The two checks above that need Rails' ActiveJob in Ruby (Debian's ruby-activejob).
NEEDS_ACTIVEJOB = "test_rails_perform_later_reaches_the_python_job_with_arguments_decoded or test_python_enqueues_what_rails_runs"
WITHOUT_ACTIVEJOB = Path(__file__).resolve().parent / "ruby" / "without_activejob.rb"


def run_without_activejob(require_ruby: bool) -> subprocess.CompletedProcess[str]:
    """This file's ActiveJob checks in a pytest of their own, with Ruby unable to load ActiveJob."""
    env = {k: v for k, v in os.environ.items() if k != "WURK_REQUIRE_RUBY"}
    env["RUBYOPT"] = f"{env.get('RUBYOPT', '')} -r{WITHOUT_ACTIVEJOB}".strip()
    if require_ruby:
        env["WURK_REQUIRE_RUBY"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rsE",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            NEEDS_ACTIVEJOB,
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_without_ruby_activejob_its_checks_are_skipped_with_the_reason_or_fail_in_ci(ruby: None) -> None:
    laptop = run_without_activejob(require_ruby=False)
    summary = laptop.stdout.strip().splitlines()[-1]
    assert laptop.returncode == 0 and "2 skipped" in summary and "passed" not in summary, laptop.stdout
    assert laptop.stdout.count("apt-get install ruby-activejob") == 2, laptop.stdout

    ci = run_without_activejob(require_ruby=True)
    summary = ci.stdout.strip().splitlines()[-1]
    assert ci.returncode != 0 and "2 errors" in summary and "skipped" not in summary, ci.stdout
    assert "WURK_REQUIRE_RUBY=1 but ruby cannot load ActiveJob" in ci.stdout, ci.stdout
