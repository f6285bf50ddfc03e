"""Writes to Redis run at a database transaction's commit, as one write group.

Django runs each ``on_commit`` callback in turn, so the pushes of one transaction reach
Redis one after the other, and a worker may run the first before the next is written. Push
gates must still see them as written together (unique jobs: the second identical push of a
transaction is a duplicate even if the first already ran and released its lock), so the
writes of one transaction share a ``client.WriteGroup``. Each stays its own callback, so a
savepoint rolled back drops only its own writes. Used by the transaction-aware pusher, a
batch written at the commit, and the outbox's delivery at the commit.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections, transaction

from django_wurk.core.client import WriteGroup, written_together


class _InWriteGroup:
    """A write run at the commit as one of its transaction's ``WriteGroup``."""

    __slots__ = ("action", "group")

    def __init__(self, action: Callable[[], object], group: WriteGroup) -> None:
        self.action = action
        self.group = group

    def __call__(self) -> None:
        with written_together(self.group):
            self.action()


def at_commit(action: Callable[[], object], alias: str) -> None:
    """``transaction.on_commit(action, using=alias)``, in the transaction's ``WriteGroup``."""
    transaction.on_commit(_InWriteGroup(action, _write_group_of(alias)), using=alias)


def _write_group_of(alias: str) -> WriteGroup:
    """The group of the writes already waiting for this transaction's commit, or a new one.

    Read from the callbacks Django keeps for the commit (those of a rolled-back savepoint
    are gone from it); the list is empty again after a commit or a rollback, so a group
    never spans two transactions.
    """
    waiting = getattr(connections[alias], "run_on_commit", None) or ()
    for entry in reversed(waiting):
        callback = entry[1] if isinstance(entry, tuple) and len(entry) > 1 else None
        if isinstance(callback, _InWriteGroup):
            return callback.group
    return WriteGroup()
