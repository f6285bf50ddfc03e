"""Database connections in worker threads, handled as Django handles them around a request.

A worker thread lives for days and runs thousands of jobs; without this, a connection
dropped by the database (a restart, a failover, an idle timeout) stays broken for every
later job on that thread, and ``CONN_MAX_AGE`` never applies. Each job is treated like a
request: unusable or expired connections are closed before and after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import close_old_connections

from django_wurk.wire import Payload


class CloseOldConnections:
    """Server middleware ``runwurk`` puts first in the chain."""

    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        close_old_connections()
        try:
            call_next()
        finally:
            close_old_connections()
