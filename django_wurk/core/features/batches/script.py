"""Calling ``core/lua/batch.lua``: every change to a batch is one call, one atomic step.

The common arguments (the time twice, the callback job's name, the index trims and the
callbacks cap) are filled in here, so the callers only name the operation and its bid.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.features.batches.settings import BatchSettings
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
    settings = config.section(BatchSettings)
    now = time.time()
    argv = [
        op,
        f"{now:.6f}",
        wire.dumps(wire.now_stamp(config.timestamps, now)),
        CALLBACK_JOB,
        settings.batch_expires_in,
        settings.batch_index_max,
        CALLBACKS_MAX,
        *args,
    ]
    return Scripts(wurk.lines.get().call).batch(argv)
