"""The lease (``django_wurk.core.lease``) and the one way Lua runs (``django_wurk.core.scripts``).

The reaper and the outbox relay hold a lease so one of them works at a time across the
cluster; the leader of periodic jobs will. These tests hold it from two owners against a
real server: only one holds it, it ends when its ttl runs out, and only its owner can
extend or give it back.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core import scripts as scripts_module
from django_wurk.core.connection import Line
from django_wurk.core.lease import Lease
from django_wurk.core.scripts import Scripts
from tests.conftest import wait_for

KEY = "wurk-test-lease"


def test_one_holder_at_a_time(wurk: Wurk, r: Any) -> None:
    a = Lease(wurk.scripts, KEY, "owner-a", 30.0)
    b = Lease(wurk.scripts, KEY, "owner-b", 30.0)
    assert a.acquire() is True and a.held()
    assert b.acquire() is False and not b.held()
    # Not reentrant: a holder that wants more time renews, so "acquired" always means "was free".
    assert a.acquire() is False and a.held()
    assert r.get(KEY) == b"owner-a"
    # The ttl is a duration the server counts down, never a moment on the holder's clock.
    assert 29_000 < r.pttl(KEY) <= 30_000


def test_a_lease_ends_when_its_ttl_runs_out_and_the_old_holder_cannot_touch_the_new_one(
    wurk: Wurk, r: Any
) -> None:
    a = Lease(wurk.scripts, KEY, "owner-a", 0.05)
    b = Lease(wurk.scripts, KEY, "owner-b", 30.0)
    assert a.acquire()
    wait_for(b.acquire)  # free once the server expired it
    assert not a.held()  # by its own clock too: held() never outlives the key
    assert a.renew() is False and a.release() is False
    assert r.get(KEY) == b"owner-b" and r.pttl(KEY) > 29_000


def test_only_the_owner_renews(wurk: Wurk, r: Any) -> None:
    a = Lease(wurk.scripts, KEY, "owner-a", 30.0)
    b = Lease(wurk.scripts, KEY, "owner-b", 30.0)
    assert a.acquire()
    r.pexpire(KEY, 500)  # as if most of the ttl had passed
    assert b.renew() is False and not b.held()
    assert r.pttl(KEY) <= 500
    assert a.renew() is True and a.held()
    assert r.pttl(KEY) > 29_000 and r.get(KEY) == b"owner-a"


def test_renewing_a_lease_nobody_holds_does_not_take_it(wurk: Wurk, r: Any) -> None:
    a = Lease(wurk.scripts, KEY, "owner-a", 30.0)
    assert a.renew() is False and not a.held()
    assert r.exists(KEY) == 0


def test_only_the_owner_releases(wurk: Wurk, r: Any) -> None:
    a = Lease(wurk.scripts, KEY, "owner-a", 30.0)
    b = Lease(wurk.scripts, KEY, "owner-b", 30.0)
    assert a.acquire()
    assert b.release() is False
    assert r.get(KEY) == b"owner-a" and a.held()
    assert a.release() is True and not a.held()
    assert r.exists(KEY) == 0
    assert a.release() is False  # twice is harmless
    assert b.acquire() is True


def test_a_lease_needs_a_positive_ttl(wurk: Wurk) -> None:
    with pytest.raises(ValueError, match="positive ttl"):
        Lease(wurk.scripts, KEY, "owner-a", 0)


def test_the_reaper_and_the_relay_leave_a_lease_they_do_not_hold_alone(wurk: Wurk, r: Any) -> None:
    """A pass that finds the lease taken does nothing and does not release it."""
    from django_wurk.core import keys
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.reaper import Reaper

    r.set(keys.REAPER_LOCK, "someone-else", px=30_000)
    r.lpush("queue:sq|deadhost:1:0123456789ab|default", b'{"class":"X","args":[],"jid":"j"}')
    reaper = Reaper(wurk, "testhost:1:ffffffffffff", Outage(wurk.config.redis_url))
    assert reaper.reap() == 0
    assert r.get(keys.REAPER_LOCK) == b"someone-else"
    r.delete(keys.REAPER_LOCK)
    assert reaper.reap() == 1
    assert r.exists(keys.REAPER_LOCK) == 0  # released after its pass


# One way to run Lua ---------------------------------------------------------------------


def test_every_lua_file_is_a_script_with_a_method() -> None:
    files = {
        entry.name.removesuffix(".lua")
        for entry in resources.files("django_wurk.core").joinpath("lua").iterdir()
        if entry.name.endswith(".lua")
    }
    assert files == {script.name for script in scripts_module.ALL}


@pytest.mark.parametrize("over", ["pool", "line"])
def test_scripts_are_loaded_again_after_the_server_forgot_them(wurk: Wurk, r: Any, over: str) -> None:
    """A restarted server (or SCRIPT FLUSH) answers NOSCRIPT: the script is loaded and run once more."""
    line = Line(r)
    scripts = wurk.scripts if over == "pool" else Scripts(line.call)
    try:
        assert scripts.acquire_lease(KEY, "owner-a", 30_000) is True
        r.script_flush()
        assert r.script_exists(scripts_module.LEASE_RELEASE.sha) == [False]
        assert scripts.release_lease(KEY, "owner-a") is True
        assert r.script_exists(scripts_module.LEASE_RELEASE.sha) == [True]
        assert r.exists(KEY) == 0
    finally:
        line.close()
