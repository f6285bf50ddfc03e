"""Priority lists with a Ruby worker (issue 26): a Sidekiq process told to fetch a queue's
priority lists as queues, highest first in strict order (docs/priority.md), runs our
prioritised jobs in our order, and a job it retries comes back to a list ours fetch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django_wurk import Wurk
from tests.conftest import wait_for
from tests.interop.conftest import on_versions, ruby_seen
from tests.jobsapp.interop_jobs import RubyEcho

#: Every Sidekiq of a mixed fleet lists queues the same way: 6.4.1, 7.3 and 8.0.
pytestmark = on_versions()


def test_a_ruby_worker_listing_the_priority_lists_runs_them_in_priority_order(
    wurk: Wurk, r: Any, ruby_worker: Callable[..., Any]
) -> None:
    for priority, tag in ((-5, "low"), (0, "zero"), (5, "high"), (0, "zero 2"), (5, "high 2")):
        RubyEcho.set(queue="rbprio", priority=priority).perform_async(tag)
    assert r.smembers("queues") == {b"rbprio", b"rbprio@5", b"rbprio@-5"}
    ruby_worker("rbprio@5", "rbprio", "rbprio@-5", concurrency=1)
    wait_for(lambda: len(ruby_seen(r)) == 5, timeout=60)
    assert [seen["args"] for seen in ruby_seen(r)] == [["high"], ["high 2"], ["zero"], ["zero 2"], ["low"]]
