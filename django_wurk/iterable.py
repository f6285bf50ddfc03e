"""Iterable jobs for Django projects: ``IterableJob`` and its enumerators (a queryset's here).

See ``docs/iterable.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from django_wurk.core.features.iterable import (
    Interrupted,
    IterableJob,
    UnreadableIterationState,
    csv_batches_enumerator,
    csv_enumerator,
    list_enumerator,
    stopping,
)

M = TypeVar("M", bound=Model)


def queryset_enumerator(queryset: QuerySet[M], cursor: Any, batch_size: int = 100) -> Iterator[tuple[M, Any]]:
    """Rows of ``queryset`` in primary-key order, after ``cursor`` (the last primary key done).

    Reads ``batch_size`` rows per query with ``pk > cursor`` rather than an offset, so rows
    added or deleted while the job runs (or waits to resume) neither shift nor repeat the
    rest. A primary key that is not an int or a string (a UUID) is kept as its text.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
    ordered = queryset.order_by("pk")
    while True:
        page = ordered.filter(pk__gt=cursor) if cursor is not None else ordered
        rows = list(page[:batch_size])
        for row in rows:
            pk = row.pk
            cursor = pk if isinstance(pk, (int, str)) else str(pk)
            yield row, cursor
        if len(rows) < batch_size:
            return


__all__ = [
    "Interrupted",
    "IterableJob",
    "UnreadableIterationState",
    "csv_batches_enumerator",
    "csv_enumerator",
    "list_enumerator",
    "queryset_enumerator",
    "stopping",
]
