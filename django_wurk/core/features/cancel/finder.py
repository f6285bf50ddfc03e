"""``cancel(jid)``: cancel one job wherever it is, and ``settle``, which records a removed one.

The flag is written first, then the job is looked for where a job goes, in the order it
goes there: the schedule and retry sets, then the queues, then the private lists of the
processes (fetched, or running) and their busy hashes. A job moving on while it is looked
for is found further on, or already meets its flag at its start; a job that is nowhere
(never pushed, finished, dead) gets only the flag, which lives a month and stops any copy of
it from starting.

A job found in a set or a queue is removed there and ``settle``d: it never runs, and what
records a job's outcome records it as cancelled. A job found fetched or running is left to
its worker, which honours the flag (see ``middleware`` and ``watcher``).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from django_wurk.core import api, keys, wire
from django_wurk.core.control import Cancelled
from django_wurk.core.features.cancel import flag
from django_wurk.core.features.cancel.middleware import settling

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.cancel")

#: A jid is text: at most this many characters (longer is not a jid anyone wrote).
JID_MAX = 1024
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")


def _engine(wurk: Wurk | None) -> Wurk:
    if wurk is not None:
        return wurk
    from django_wurk.core.engine import wurk as default

    return default


def check_jid(jid: Any) -> str:
    if not isinstance(jid, str) or not jid or len(jid) > JID_MAX:
        raise ValueError(f"cancel: jid must be text of 1 to {JID_MAX} characters, got {jid!r:.80}")
    return jid


def cancel(jid: str, wurk: Wurk | None = None) -> bool:
    """Cancel the job ``jid``: True if it was found waiting, scheduled, retrying or running.

    A job waiting in a queue, or in the schedule or retry set, is removed and never runs.
    A job fetched by a worker never starts; a running one sees ``current_job().cancelled``
    at once and is stopped after ``WURK["CANCEL_GRACE"]`` if it does not stop itself. True
    says where the job was, not that it did not finish: a running job may end first (see
    docs/cancel.md). False: the job was not found (finished, dead, unknown); its flag is
    written all the same, so a copy of it that turns up later does not run.
    """
    engine = _engine(wurk)
    check_jid(jid)
    done_before = flag.set_flag(engine.redis, jid)
    for kind in (api.ScheduledSet, api.RetrySet):
        entry = _in_set(kind(engine), jid)
        if entry is not None and entry.delete():
            settle(engine, entry.payload)
            return True
    for queue in api.Queue.all(engine):
        record = queue.find_job(jid)
        if record is not None and queue.delete_job(record):
            settle(engine, record.payload)
            return True
    # Not found: it may have met the flag at its start, or stopped, while we looked (its
    # worker marks that before it acknowledges the job, so it is marked by now).
    if fetched(engine, jid) or busy(engine, jid):
        return True
    return not done_before and flag.ended(engine.redis, jid)


def _in_set(sset: api.SortedSet, jid: str) -> api.SortedEntry | None:
    """The entry of ``sset`` with this jid. ``find_job`` asks Redis to match the jid's text
    (ZSCAN); a jid UTF-8 cannot encode (a lone surrogate from a ``\\ud800`` escape) is
    compared on every entry instead."""
    try:
        jid.encode("utf-8")
    except UnicodeEncodeError:
        return next((e for e in sset.iterate() if e.jid == jid), None)
    return sset.find_job(jid)


def _matches(raw: bytes, jid: str, needle: bytes | None) -> bool:
    if needle is not None and needle not in raw and b"\\u" not in raw:
        return False
    return api.JobRecord(raw).jid == jid


def fetched(wurk: Wurk, jid: str) -> bool:
    """Whether ``jid`` sits in a process's private list (fetched, running, or waiting there
    for a dead process's recovery): each list is read whole, they hold a few jobs each."""
    needle = jid.encode("ascii") if _PLAIN.fullmatch(jid) else None
    redis = wurk.redis
    for key in redis.scan_iter(match=f"{keys.PRIVATE_QUEUE_PREFIX}*", count=500, _type="list"):
        try:
            members = redis.lrange(key, 0, -1)
        except Exception:  # the key changed type since the scan: not a private list any more
            continue
        if any(_matches(raw, jid, needle) for raw in members):
            return True
    return False


def busy(wurk: Wurk, jid: str) -> bool:
    """Whether a process's busy hash says it runs ``jid`` (Ruby workers, basic fetch)."""
    return any(running.record.jid == jid for running in api.Workers(wurk))


def settle(wurk: Wurk, payload: Any) -> None:
    """Record a job that will not run as cancelled, through the server middleware.

    It is run as a worker would run it, with the cancel middleware told to end it at once
    (``settling``): the middleware outside it see ``Cancelled`` pass, so job status says
    ``cancelled``, a batch counts it, a unique lock is released, Celery's result says
    REVOKED, and it is counted once in ``stat:cancelled``. The job's ``perform`` is never
    called. A payload that cannot be run here (unreadable, a class this process does not
    know) is only counted.
    """
    from django_wurk.core.engine import Execution, UnknownJobError

    if not isinstance(payload, dict) or wurk.feature("cancel") is None:
        flag.count(wurk.redis)
        return
    token = settling.set(True)
    try:
        Execution(wurk, payload).run()
    except Cancelled:
        return
    except (UnknownJobError, KeyError, TypeError) as exc:
        logger.info("cancelled job %r: not recorded beyond its count (%s)", payload.get("jid"), exc)
        flag.count(wurk.redis)
        return
    except Exception as exc:
        logger.warning("cancelled job %r: could not record its outcome: %s", payload.get("jid"), exc)
        return
    finally:
        settling.reset(token)
    # The chain returned without the cancel middleware ending it: a middleware outside it
    # skipped the job (rate limit, expiry), which recorded what it did.
    logger.info("cancelled job %r was ended by another middleware first (%s)", payload.get("jid"),
                wire.job_display_class(payload))  # fmt: skip
