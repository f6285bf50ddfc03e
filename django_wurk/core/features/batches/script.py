"""Calling ``core/lua/batch.lua``: every change to a batch is one call, one atomic step.

The common arguments (the time twice, the callback job's name, the index trims and the
callbacks cap) are filled in here, so the callers only name the operation and its bid.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.client import RedisPusher
from django_wurk.core.scripts import Scripts

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: The wire name of the job that runs batch callbacks (``CallbackJob``).
CALLBACK_JOB = "django_wurk.BatchCallbackJob"
#: The most callbacks one batch keeps (Sidekiq Pro's ``CALLBACKS_MAX``).
CALLBACKS_MAX = 1000


def run(wurk: Wurk, op: str, *args: Any) -> Any:
    """One call of the batch script on this thread's connection (one round trip)."""
    config = wurk.config
    now = time.time()
    argv = [
        op,
        f"{now:.6f}",
        wire.dumps(wire.now_stamp(config.timestamps, now)),
        CALLBACK_JOB,
        config.batch_expires_in,
        config.batch_index_max,
        CALLBACKS_MAX,
        *args,
    ]
    return Scripts(wurk.lines.get().call).batch(argv)


def writes_to_redis(wurk: Wurk) -> bool:
    """False under the testing modes (``fake()``/``inline()``), which keep no batch state.

    The pusher is a chain of wrappers (transactions, the outage buffer) around the one that
    writes to Redis; a testing mode replaces the whole chain.
    """
    pusher: Any = wurk.pusher
    while pusher is not None:
        if isinstance(pusher, RedisPusher):
            return True
        pusher = getattr(pusher, "inner", None)
    return False
