"""One cancel flag with Ruby: Sidekiq 7.3+'s ``cancel!`` stops our job, and ours writes what it writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django_wurk import Config, Wurk, cancel
from django_wurk.core import keys
from django_wurk.core.features.cancel import CancelSettings
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import on_versions
from tests.jobsapp import jobs

#: ``Sidekiq::Client#cancel!`` came with iterable jobs in 7.3.
pytestmark = on_versions("7.3", "8.0")


def test_a_job_cancelled_from_ruby_is_stopped_here(
    wurk: Wurk, r: Any, rb: Callable[..., Any], test_config: Config
) -> None:
    """Ruby's ``cancel!`` writes the flag only (Sidekiq itself honours it in iterable jobs): our
    worker sees it on the running job within ``LOOK_EVERY`` and stops it after the grace; it
    never finishes, and is neither retried nor buried."""
    jid = jobs.slow_mark.perform_async("ruby-cancelled", 30)
    rb(op="cancel_iteration", jid=jid)
    assert r.hexists(keys.iteration_state(jid), keys.CANCELLED_FIELD)
    wurk.configure(test_config.with_section(CancelSettings(cancel_grace=0.5)))
    worker = Launcher(wurk)
    worker.start()
    try:
        wait_for(lambda: int(r.get(keys.STAT_CANCELLED) or 0) == 1, timeout=30)
    finally:
        worker.stop()
    assert r.llen("timeouts:slow-done") == 0
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0


def test_our_flag_has_rubys_shape(wurk: Wurk, r: Any, rb: Callable[..., Any]) -> None:
    rb(op="cancel_iteration", jid="from-ruby")
    assert cancel("from-python") is False  # pushed nowhere: only the flag
    theirs, ours = r.hgetall("it-from-ruby"), r.hgetall("it-from-python")
    assert set(theirs) == {b"cancelled"}
    assert set(ours) == {b"cancelled", b"c"} and ours[b"c"] == b"null"  # a cursor Ruby can parse
    assert abs(int(theirs[b"cancelled"]) - int(ours[b"cancelled"])) < 120  # epoch seconds, integers
    assert abs(r.ttl("it-from-ruby") - r.ttl("it-from-python")) < 120
