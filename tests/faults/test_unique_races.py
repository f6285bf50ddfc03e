"""Unique jobs pushed twice in one transaction while a real worker waits for work.

At the commit the transaction's pushes are written one after the other. An idle worker
takes the first the moment it is written, runs it and releases its lock; were the second
then checked against the lock alone it would find it free and run too. The pushes of one
transaction are one write group, so the second is dropped whatever became of the first
(docs/unique.md). Run on SQLite and, with ``DATABASE_URL``, on PostgreSQL.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import transaction

from django_wurk import Wurk
from django_wurk.conf import Settings
from tests.conftest import wait_for
from tests.jobsapp.unique_jobs import runs, sync_address
from tests.test_runwurk import identity_of

pytestmark = pytest.mark.django_db(transaction=True)

#: Transactions per test: back to back, the second push ran in up to half of them before the fix.
ROUNDS = 60


def run_counts(
    wurk: Wurk, spawn_worker: Callable[..., subprocess.Popen[str]], push_twice: Callable[[int], None]
) -> Counter[int]:
    """How many times each round's job ran, with one idle worker taking each job at once."""
    worker = spawn_worker("-c", "1")
    identity_of(wurk.redis, worker.pid)  # up, and blocked waiting for a job
    for n in range(ROUNDS):
        push_twice(n)
    # A last job behind all the others: one thread runs them in order, so once it ran,
    # every job pushed before it has run.
    sync_address.set(unique_for=False).perform_async(-1)
    wait_for(lambda: [-1, None] in runs("sync_address"), timeout=60)
    return Counter(user_id for user_id, _ in runs("sync_address") if user_id >= 0)


def back_to_back(n: int) -> None:
    with transaction.atomic():
        sync_address.perform_async(n)
        sync_address.perform_async(n)


def ran(n: int) -> bool:
    return any(user_id == n for user_id, _ in runs("sync_address"))


def first_runs_before_the_second_is_written(n: int) -> None:
    """Another on_commit callback between the two (the app's own) outlasts the first job."""
    with transaction.atomic():
        sync_address.perform_async(n)
        transaction.on_commit(lambda: wait_for(lambda: ran(n), timeout=30))
        sync_address.perform_async(n)


def in_a_savepoint(n: int) -> None:
    with transaction.atomic():
        sync_address.perform_async(n)
        transaction.on_commit(lambda: wait_for(lambda: ran(n), timeout=30))
        with transaction.atomic():  # a savepoint that commits: its push is the transaction's
            sync_address.perform_async(n)


@pytest.mark.parametrize(
    "push_twice",
    [back_to_back, first_runs_before_the_second_is_written, in_a_savepoint],
    ids=["back to back", "first ran", "savepoint"],
)
def test_the_second_identical_push_of_a_transaction_never_runs(
    wurk: Wurk, spawn_worker: Callable[..., subprocess.Popen[str]], push_twice: Callable[[int], None]
) -> None:
    counts = run_counts(wurk, spawn_worker, push_twice)
    assert sorted(counts) == list(range(ROUNDS))
    assert [n for n, times in counts.items() if times != 1] == []


def test_outbox_rows_of_one_transaction_push_one_identical_job(
    wurk: Wurk, spawn_worker: Callable[..., subprocess.Popen[str]], use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(enqueue="outbox")
    counts = run_counts(wurk, spawn_worker, back_to_back)
    assert sorted(counts) == list(range(ROUNDS))
    assert [n for n, times in counts.items() if times != 1] == []
