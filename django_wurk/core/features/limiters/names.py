"""Keeping ``lmtr-list`` (every limiter's name) bounded.

A name is added once, when its limiter's description is created; the description expires
with the limiter's ``ttl``, but the set has no per-member expiry. So every time a process
registers a new limiter, it sweeps the next chunk (512 names) of the set of names whose
description is gone, resuming where its last sweep stopped: the set holds the live
limiters plus at most what expired since the sweep last went round, however many
per-tenant names come and go.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from django_wurk.core.features.limiters import keys

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.limiter")

CHUNK = 512

_cursor = 0
_lock = threading.Lock()


def sweep(wurk: Wurk, cursor: int = 0, count: int = CHUNK) -> tuple[int, int]:
    """Sweep one chunk from ``cursor``: ``(next cursor, names removed)``; cursor 0 = done."""
    try:
        cursor, names = wurk.redis.sscan(keys.NAMES, cursor, count=count)
    except ResponseError:
        return 0, 0  # not a set: the next registration starts it afresh
    names = [n for n in names if isinstance(n, bytes)]
    if not names:
        return int(cursor), 0
    meta_keys = [keys.meta(n) for n in names]
    removed = wurk.scripts.sweep_limiters(keys.NAMES, meta_keys, names)  # type: ignore[arg-type]
    return int(cursor), removed


def after_register(wurk: Wurk) -> None:
    """Called when this process created a limiter's description: sweep the next chunk."""
    global _cursor
    if not _lock.acquire(blocking=False):
        return  # another thread of this process is sweeping
    try:
        _cursor, removed = sweep(wurk, _cursor)
        if removed:
            logger.debug("swept %d expired limiter names from %s", removed, keys.NAMES)
    except RedisError as exc:
        logger.warning("could not sweep %s: %s", keys.NAMES, exc)
    finally:
        _lock.release()
