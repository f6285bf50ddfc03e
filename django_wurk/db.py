"""Database connections in worker threads, handled as Django handles them around a request.

A worker thread lives for days and runs thousands of jobs; without this, a connection
dropped by the database (a restart, a failover, an idle timeout) stays broken for every
later job on that thread, and ``CONN_MAX_AGE`` never applies. Each job is treated like a
request: unusable or expired connections are closed before and after it.

The check costs a walk over every configured database per call, which would be a fifth of
a no-op job's time; so a thread that has never opened a database connection skips it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from django.db.backends.signals import connection_created

from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.wire import Payload


class _Thread(threading.local):
    #: A class attribute, so that a thread that never opened one reads False without a
    #: lookup that fails (a missing attribute of a ``threading.local`` formats an
    #: AttributeError's message even under ``getattr(..., default)``).
    has_connections = False


_thread = _Thread()


def _opened(sender: Any, connection: Any, **kwargs: Any) -> None:
    _thread.has_connections = True


connection_created.connect(_opened, dispatch_uid="django_wurk.db.opened")


def thread_has_connections() -> bool:
    """Whether this thread ever opened a database connection: if not, it has none to check
    and no transaction open, and the per-database walks can be skipped."""
    return _thread.has_connections


class CloseOldConnections:
    """Server middleware ``runwurk`` puts first in the chain (``FEATURE``)."""

    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        local = _thread  # thread_has_connections(), without two calls per job
        if local.has_connections:
            close_old_connections()
        try:
            call_next()
        finally:
            if local.has_connections:
                close_old_connections()


#: Django's connection handling around each job, as around each request: a worker's feature
#: (``runwurk`` uses it; tests and inline runs keep Django's own handling), outside every
#: other, so a middleware's own queries are covered too.
FEATURE = Feature(
    "database", lambda wurk: Plug(server=CloseOldConnections()), server_place=Place(edge="outer")
)
