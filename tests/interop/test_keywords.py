"""Keyword arguments on the wire with Ruby Sidekiq 6.4.1 (docs/jobs.md, "How keyword arguments travel").

Python writes them under the payload key ``kwargs``. Ruby runs such a job with its positional
arguments (the key is ignored, not an error), keeps the key through its retry set, and Ruby
code can read it (``app.rb``'s server middleware); a Ruby push that sets ``kwargs`` reaches a
Python job as keyword arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django_wurk import Wurk, job, wurk
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import on_versions, ruby_seen
from tests.jobsapp.interop_jobs import RubyEcho, RubyFail, RubyKeywords

#: Against each Sidekiq version (6.4.1, 7.3, 8.0), one after the other.
pytestmark = on_versions()


@job(wire_name="KeywordCheck::Greet")
def greet(name: str, *, greeting: str = "hello", times: int = 1) -> None:
    wurk.redis.rpush("seen:keywords", json.dumps([name, greeting, times]))


def test_ruby_runs_a_keyword_call_and_can_read_the_keywords(
    wurk: Wurk, r: Any, ruby_worker: Callable[..., Any]
) -> None:
    ruby_worker("ruby", concurrency=1)
    keywords = {"user_id": 7, "tags": ["a", "b"], "opts": {"nested": [1.5, None, True]}}
    jid = RubyKeywords.perform_async(1, "x", **keywords)
    echo = RubyEcho.perform_async(2, flag=True)
    wait_for(lambda: len(ruby_seen(r)) == 2, timeout=30)
    seen = {s["jid"]: s for s in ruby_seen(r)}
    assert (seen[jid]["args"], seen[jid]["kwargs"]) == ([1, "x"], keywords)
    # A Ruby job that knows nothing of them runs with its positional arguments.
    assert seen[echo]["args"] == [2]


def test_ruby_keeps_the_keywords_through_its_retry_set(
    wurk: Wurk, r: Any, ruby_worker: Callable[..., Any]
) -> None:
    worker = ruby_worker("ruby", concurrency=1)
    jid = RubyFail.perform_async("boom", attempt=3)
    wait_for(lambda: r.zcard("retry") == 1, timeout=30)
    worker.proc.terminate()
    worker.proc.wait(30)
    [entry] = [json.loads(m) for m in r.zrange("retry", 0, -1)]
    assert entry["jid"] == jid and entry["error_class"] == "ArgumentError"
    assert (entry["args"], entry["kwargs"]) == (["boom"], {"attempt": 3})


def test_a_ruby_push_with_kwargs_reaches_the_python_jobs_keyword_parameters(
    wurk: Wurk, r: Any, rb: Callable[..., Any], start_python_worker: Callable[..., Launcher]
) -> None:
    start_python_worker("default")
    item = {"class": "KeywordCheck::Greet", "queue": "default", "args": ["ann"], "kwargs": {"times": 2}}
    rb(op="push", item=item)
    wait_for(lambda: r.llen("seen:keywords") == 1, timeout=30)
    assert json.loads(r.lindex("seen:keywords", 0)) == ["ann", "hello", 2]
