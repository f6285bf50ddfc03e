"""Iterable jobs (Sidekiq 7.3's): a long job that walks a cursor and resumes where it stopped.

See ``docs/iterable.md``. A subclass of ``IterableJob`` says how to enumerate its items from a
cursor and what to do with each; the base class saves the cursor in Redis (``it-<jid>``) as it
goes and when the worker stops, so a restarted or recovered job picks up from there.
"""

from django_wurk.core.control import stopping
from django_wurk.core.features.iterable.enumerators import (
    csv_batches_enumerator,
    csv_enumerator,
    list_enumerator,
)
from django_wurk.core.features.iterable.job import Interrupted, IterableJob
from django_wurk.core.features.iterable.state import IterationState, UnreadableIterationState, state_key

__all__ = [
    "Interrupted",
    "IterableJob",
    "IterationState",
    "UnreadableIterationState",
    "csv_batches_enumerator",
    "csv_enumerator",
    "list_enumerator",
    "state_key",
    "stopping",
]
