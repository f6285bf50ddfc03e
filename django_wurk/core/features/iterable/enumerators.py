"""Ready-made enumerators for ``build_enumerator``: a list, and the rows of a CSV file.

Each yields ``(item, cursor)`` pairs where the cursor is the number of items (rows) done
once that item is done, and resumes by skipping that many. That is also the number Sidekiq's
``array_enumerator`` and ``csv_enumerator`` leave in ``it-<jid>`` when they stop, so a saved
cursor means the same on both sides (Sidekiq yields the item's own index and saves it before
doing the item; we yield the count after it and save it after: the stored value is equal).

The cursor comes from Redis, so it is checked when the enumerator is built: anything but a
count (an int, at least 0) is a ``ValueError`` that names it, not a silent start from 0.
The Django queryset enumerator is in ``django_wurk.iterable``.
"""

from __future__ import annotations

import csv
import itertools
import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import closing
from typing import IO, Any

#: What ``csv_enumerator`` reads: a path (opened, and closed when the enumerator ends) or an
#: open text file, which stays the caller's to close (opened with ``newline=""``, as ``csv`` wants).
CsvSource = str | os.PathLike[str] | IO[str]


def count_done(cursor: Any, where: str) -> int:
    """``cursor`` as a number of items done: 0 for None (the first run)."""
    if cursor is None:
        return 0
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise ValueError(
            f"{where}: cursor must be the number of items done (an int, at least 0) or None, "
            f"got {cursor!r:.100}; delete it-<jid> to start over"
        )
    return cursor


def list_enumerator(items: Sequence[Any], cursor: Any) -> Iterator[tuple[Any, int]]:
    """The items of ``items`` after the first ``cursor`` (Sidekiq's ``array_enumerator``).

    The cursor of ``items[i]`` is ``i + 1``. The sequence should be the same one at every run
    (built from the job's arguments, say): resuming counts positions, not values.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(
            f"list_enumerator: items must be a list or another sequence, got {type(items).__name__}"
        )
    start = count_done(cursor, "list_enumerator")
    return ((items[i], i + 1) for i in range(start, len(items)))


def csv_enumerator(
    source: CsvSource, cursor: Any, *, header: bool = False, encoding: str = "utf-8", **fmtparams: Any
) -> Iterator[tuple[Any, int]]:
    """The rows of a CSV file after the first ``cursor`` (Sidekiq's ``csv_enumerator``).

    Each row is a list of strings, or with ``header=True`` a dict keyed by the first row
    (which is not counted). The cursor of a row is its number, counted from 1: the rows
    done. ``fmtparams`` go to ``csv.reader`` (``delimiter=";"``...). A row that spans lines
    (a quoted newline) counts once.
    """
    start = count_done(cursor, "csv_enumerator")
    return _numbered(_csv_rows(source, header, encoding, fmtparams), start)


def csv_batches_enumerator(
    source: CsvSource,
    cursor: Any,
    *,
    batch_size: int = 100,
    header: bool = False,
    encoding: str = "utf-8",
    **fmtparams: Any,
) -> Iterator[tuple[list[Any], int]]:
    """Lists of up to ``batch_size`` rows of a CSV file (Sidekiq's ``csv_batches_enumerator``).

    The cursor is the number of rows done (not of batches, as in Sidekiq), so a job whose
    ``batch_size`` changes between two runs still resumes at the right row.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"csv_batches_enumerator: batch_size must be an int of at least 1, got {batch_size!r}"
        )
    start = count_done(cursor, "csv_batches_enumerator")
    return _batched(_csv_rows(source, header, encoding, fmtparams), start, batch_size)


def _csv_rows(
    source: CsvSource, header: bool, encoding: str, fmtparams: dict[str, Any]
) -> Generator[Any, None, None]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, newline="", encoding=encoding) as file:
            yield from _reader(file, header, fmtparams)
    else:
        yield from _reader(source, header, fmtparams)


def _reader(file: Iterable[str], header: bool, fmtparams: dict[str, Any]) -> Iterator[Any]:
    return csv.DictReader(file, **fmtparams) if header else csv.reader(file, **fmtparams)


def _numbered(rows: Generator[Any, None, None], start: int) -> Iterator[tuple[Any, int]]:
    with closing(rows):  # a job that stops early closes this, and so the file it opened
        for done, row in enumerate(itertools.islice(rows, start, None), start + 1):
            yield row, done


def _batched(
    rows: Generator[Any, None, None], start: int, batch_size: int
) -> Iterator[tuple[list[Any], int]]:
    with closing(rows):
        rest = itertools.islice(rows, start, None)
        done = start
        while batch := list(itertools.islice(rest, batch_size)):
            done += len(batch)
            yield batch, done
