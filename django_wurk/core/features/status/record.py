"""The ``status:<jid>`` hash: its key, its fields, and the one way it is written.

Every field is text. Times are epoch seconds; ``progress`` a number from 0 to 100;
``result`` the job's return value as JSON (at most ``RESULT_MAX`` bytes), ``error`` its
last failure as ``Class: message`` (at most ``ERROR_MAX`` bytes). Each write stamps the
hash's TTL again (``STATUS_RETENTION``), so a status lives that long after its last change.

A status is a report on the job, never part of running it: a write that fails (Redis down)
is logged and skipped, and the job goes on as if it were untracked.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from django_wurk.core import wire
from django_wurk.core.client import writes_to_redis
from django_wurk.core.features.status.settings import StatusSettings

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.status")

#: The job option that turns tracking on, and its payload key.
TRACK = "track"
#: The states, in the order a job meets them (``retrying`` may come back to ``running``).
ENQUEUED, RUNNING, SUCCEEDED, RETRYING, FAILED, DEAD, CANCELLED = (
    "enqueued",
    "running",
    "succeeded",
    "retrying",
    "failed",
    "dead",
    "cancelled",
)
STATES = (ENQUEUED, RUNNING, SUCCEEDED, RETRYING, FAILED, DEAD, CANCELLED)
#: The most bytes of a return value kept (its JSON), and of an error (``Class: message``).
RESULT_MAX = 8 * 1024
ERROR_MAX = 1024
#: The most bytes of a progress message kept.
MESSAGE_MAX = 1024


def status_key(jid: str) -> str:
    return f"status:{jid}"


def tracked(payload: Any) -> bool:
    """Only ``true`` turns tracking on: a payload's ``"yes"`` or ``1`` is another producer's."""
    return isinstance(payload, dict) and payload.get(TRACK) is True and isinstance(payload.get("jid"), str)


def check_track(value: Any, where: str) -> bool | None:
    """The option's check at ``set()`` and class definition."""
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{where}: track must be True or False, got {value!r}")


def clip(text: str, most: int) -> str:
    """``text`` cut to at most ``most`` bytes of UTF-8, on a character boundary."""
    data = text.encode("utf-8", "replace")
    if len(data) <= most:
        return text.encode("utf-8", "replace").decode("utf-8")
    return data[: most - 3].decode("utf-8", "ignore") + "..."


def error_text(exc: BaseException) -> str:
    return clip(f"{wire.error_class(exc)}: {wire.error_message(exc)}", ERROR_MAX)


def now() -> str:
    return repr(round(time.time(), 3))


def write(wurk: Wurk, jid: str, fields: dict[str, str], drop: tuple[str, ...] = ()) -> bool:
    """Set ``fields`` (and remove ``drop``) in the job's status, and stamp its TTL; atomic.

    False, logged, if Redis could not be written: the status falls behind, the job does not.
    Nothing is written under the testing modes (``fake()``/``inline()``), which keep no
    Redis state.
    """
    if not writes_to_redis(wurk):
        return False
    key = status_key(jid)
    commands: list[tuple[Any, ...]] = [("HSET", key, *[x for kv in fields.items() for x in kv])]
    if drop:
        commands.append(("HDEL", key, *drop))
    commands.append(("EXPIRE", key, wurk.config.section(StatusSettings).status_retention))
    try:
        pipe = wurk.redis.pipeline(transaction=True)
        for command in commands:
            pipe.execute_command(*command)
        pipe.execute()
    except (RedisError, OSError) as exc:
        logger.warning("could not write the status of job %r: %s", jid, exc)
        return False
    return True
