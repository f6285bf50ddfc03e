"""Unique jobs inside database transactions: the lock is taken when the push really happens.

Inside ``transaction.atomic()`` the push waits for the commit (or becomes an outbox row),
so ``perform_async`` cannot know yet whether the job will be a duplicate: it returns the
jid it assigned, and the lock is taken (or the job dropped) at the commit. A rollback
takes no lock. These run on SQLite and, with ``DATABASE_URL`` set, on PostgreSQL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from django_wurk import Config, Wurk
from django_wurk.api import unique_lock_owner
from django_wurk.conf import Settings
from django_wurk.models import OutboxEntry
from django_wurk.outbox import relay_once
from tests.jobsapp.unique_jobs import sync_address

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_REDIS = "redis://127.0.0.1:1/0"


def queued_jids(r: Any, queue: str = "default") -> list[str]:
    return [json.loads(x)["jid"] for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


@pytest.fixture
def outbox(wurk: Wurk, use_app_settings: Callable[..., Settings]) -> Wurk:
    use_app_settings(enqueue="outbox")
    return wurk


def test_on_commit_the_lock_is_taken_at_the_commit(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with transaction.atomic():
        first = sync_address.perform_async(1)
        second = sync_address.perform_async(1)
        # Both get their jid at once: nothing is decided before the commit.
        assert first is not None and second is not None and first != second
        assert unique_lock_owner(sync_address, [1]) is None
        assert r.llen("queue:default") == 0
    with caplog.at_level(logging.INFO, logger="django_wurk.unique"):
        assert queued_jids(r) == [first]
    assert unique_lock_owner(sync_address, [1]) == first


def test_on_commit_a_job_locked_before_the_transaction_is_dropped_at_the_commit(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    held = sync_address.perform_async(2)
    with caplog.at_level(logging.INFO, logger="django_wurk.unique"), transaction.atomic():
        inside = sync_address.perform_async(2)
        assert inside is not None  # the pre-assigned jid, though the push will be dropped
    assert queued_jids(r) == [held]
    assert f"(jid {inside}), not unique" in caplog.text


def test_a_rollback_takes_no_lock(wurk: Wurk, r: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        sync_address.perform_async(3)
        sync_address.perform_in(60, 4)
        raise RuntimeError("roll back")
    assert not list(r.scan_iter(match="unique:*"))
    assert sync_address.perform_async(3) is not None  # not blocked by the rolled-back push


def test_on_commit_false_decides_at_once(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        first = sync_address.set(on_commit=False).perform_async(5)
        assert first is not None
        assert sync_address.set(on_commit=False).perform_async(5) is None
    assert queued_jids(r) == [first]


def test_outbox_the_lock_is_taken_when_the_row_is_pushed(
    outbox: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    r = outbox.redis
    held = sync_address.perform_async(6)  # outside a transaction: a row pushed at once
    assert held is not None and queued_jids(r) == [held]
    assert sync_address.perform_async(6) is None  # decided at once, outside a transaction
    with caplog.at_level(logging.INFO), transaction.atomic():
        dup = sync_address.perform_async(6)
        new = sync_address.perform_async(7)
        assert dup is not None and new is not None
        assert unique_lock_owner(sync_address, [7]) is None  # a row, not a push yet
    assert queued_jids(r) == [held, new]
    assert unique_lock_owner(sync_address, [7]) == new
    assert OutboxEntry.objects.count() == 0  # the refused row is done with, not left for the relay
    assert "refused at the push" in caplog.text


def test_outbox_rollback_takes_no_lock(outbox: Wurk) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        sync_address.perform_async(8)
        raise RuntimeError("roll back")
    assert not list(outbox.redis.scan_iter(match="unique:*"))


def test_outbox_rows_relayed_after_an_outage_take_their_locks_then(outbox: Wurk, test_config: Config) -> None:
    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic():
        first = sync_address.perform_async(9)
        second = sync_address.perform_async(9)
    outbox.configure(test_config)
    assert relay_once(outbox, "default") == 1
    assert queued_jids(outbox.redis) == [first]
    assert unique_lock_owner(sync_address, [9]) == first
    assert second is not None and OutboxEntry.objects.count() == 0


def release_all(r: Any) -> None:
    """As if every job had run: the locks are gone."""
    for name in r.scan_iter(match="unique:*"):
        r.delete(name)


def test_the_second_push_is_dropped_even_after_the_first_released_its_lock(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The commit writes the pushes one by one; the first's job may have run in between."""
    with caplog.at_level(logging.INFO, logger="django_wurk.unique"), transaction.atomic():
        first = sync_address.perform_async(10)
        transaction.on_commit(lambda: release_all(r))
        second = sync_address.perform_async(10)
        other = sync_address.perform_async(11)
    assert queued_jids(r) == [first, other]
    assert f"(jid {second}), not unique: jid {first}" in caplog.text
    assert "pushed earlier in the same transaction" in caplog.text


def test_a_push_rolled_back_with_its_savepoint_does_not_drop_the_next(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            sync_address.perform_async(12)
            raise RuntimeError("roll back the savepoint")
        kept = sync_address.perform_async(12)
    assert queued_jids(r) == [kept]


def test_each_transaction_is_its_own_group(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        first = sync_address.perform_async(13)
    release_all(r)
    with transaction.atomic():
        again = sync_address.perform_async(13)
    with pytest.raises(RuntimeError), transaction.atomic():
        sync_address.perform_async(14)
        raise RuntimeError("roll back")
    with transaction.atomic():
        after_rollback = sync_address.perform_async(14)
    assert queued_jids(r) == [first, again, after_rollback]


def test_outbox_rows_delivered_at_the_commit_are_one_group(outbox: Wurk) -> None:
    r = outbox.redis
    with transaction.atomic():
        first = sync_address.perform_async(15)
        transaction.on_commit(lambda: release_all(r))
        sync_address.perform_async(15)
    assert queued_jids(r) == [first]
    assert OutboxEntry.objects.count() == 0
