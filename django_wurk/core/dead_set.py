"""Writing to the dead set: the one way any part of the engine buries a job.

The retry handler buries jobs that ran out of retries, the processor, poller and reaper
bury entries they cannot read or write back, and the data API's "Kill" moves an entry
here. They all write through this module, so the dead set is trimmed the same way
whoever writes to it (Sidekiq's ``dead_timeout_in_seconds`` and ``dead_max_jobs``), and an
entry that cannot be run is filed in one shape. It sits below the worker and the data API
(``api.DeadSet`` reads and edits the set) so neither has to import the other, as in
Sidekiq, where the retry handler uses the API and never the reverse.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.scripts import bury_each

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: The class name an undecodable payload is filed under in the dead set.
INVALID_PAYLOAD_CLASS = "django_wurk.InvalidPayload"


def bury(wurk: Wurk, payload: str | bytes, source: str | None = None, member: bytes | None = None) -> bool:
    """Add to the dead set with Sidekiq's trims; with ``source``, only if ``member`` was still there.

    ``payload`` may be the exact bytes read from Redis, so a kill moves an entry unchanged.
    With ``source``, removing ``member`` from it and adding ``payload`` here are one atomic
    step, so racing callers bury an entry once.
    """
    config = wurk.config
    now = time.time()
    return wurk.scripts.bury(payload, now, now - config.dead_timeout, config.dead_max_jobs, source, member)


def bury_members(wurk: Wurk, source: str, members: Sequence[bytes]) -> list[Any]:
    """``bury`` each member of ``source`` unchanged, in one round trip, each move atomic.

    One reply per member: whether it was still there to move, or the error reply (a dead
    set of another type: nothing changed), returned rather than raised.
    """
    config = wurk.config
    now = time.time()
    replies = bury_each(wurk.redis, source, members, now, now - config.dead_timeout, config.dead_max_jobs)
    return [r if isinstance(r, Exception) else bool(r) for r in replies]


def invalid_payload_envelope(
    queue: str, raw: bytes, error: wire.PayloadError, style: wire.TimestampStyle
) -> str:
    """Wrap a payload we cannot run so the dead set says why and keeps every byte of it.

    The original text is the single argument (base64 when it is not UTF-8). ``retry: 0``
    means a "Retry" from a dashboard sends it straight back to the dead set rather than
    discarding it.
    """
    now = wire.now_stamp(style)
    envelope: dict[str, Any] = {"retry": 0, "queue": queue, "class": INVALID_PAYLOAD_CLASS}
    try:
        envelope["args"] = [raw.decode("utf-8")]
    except UnicodeDecodeError:
        envelope["args"] = []
        envelope["payload_base64"] = base64.b64encode(raw).decode("ascii")
    envelope.update(
        jid=wire.new_jid(),
        created_at=now,
        enqueued_at=now,
        error_message=str(error),
        error_class=error.error_class,
        failed_at=now,
        retry_count=0,
    )
    return wire.dumps(envelope)
