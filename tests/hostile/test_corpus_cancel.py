"""The hostile-data corpus against cancel's own loop: every worker process reads
``wurk-cancels`` (``flag.Recent``) every quarter second."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_wurk import Wurk, cancel
from django_wurk.core import keys
from django_wurk.core.features.cancel import CancelError
from django_wurk.core.features.cancel.flag import Recent
from tests.hostile.corpus import ODD_NAMES


def test_the_recent_cancels_survive_hostile_members_and_a_wrong_type(wurk: Wurk, r: Any) -> None:
    """Every worker process reads ``wurk-cancels`` in a loop: junk members (odd bytes, odd
    scores) are skipped, a cancel's own jid is still seen, and a key of another type fails the
    read (the watcher logs it and goes on) rather than being taken for "nothing cancelled"."""
    r.zadd(keys.RECENT_CANCELS, {name: time.time() for name in ODD_NAMES})
    r.zadd(keys.RECENT_CANCELS, {b"\xff\xfe not utf-8": time.time(), b"old": time.time() - 2 * 86400})
    cancel("a-real-one")
    recent = Recent()
    recent.refresh(r)
    assert "a-real-one" in recent and "old" not in recent
    r.delete(keys.RECENT_CANCELS)
    r.set(keys.RECENT_CANCELS, b"\x00junk")
    with pytest.raises(Exception, match="WRONGTYPE"):
        recent.refresh(r)
    assert "a-real-one" in recent  # what it knew stays
    with pytest.raises(CancelError, match="wurk-cancels"):
        cancel("another")
    assert r.hexists(keys.iteration_state("another"), keys.CANCELLED_FIELD)  # the flag is set
