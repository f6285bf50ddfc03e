"""How batches plug into the engine: middleware and handlers, never the processor.

* Client middleware: a job pushed inside an open ``jobs()`` block gets the block's
  ``bid``; a failed batch job pushed again (a retry, or a dead job retried from the dead
  set) rejoins its batch if it had died.
* Server middleware: while a batch job runs, its bid is this context's running batch (so
  ``Batch.current()`` and child batches find it); when it returns, its success is counted;
  a cancelled job (``Cancelled`` passing out) is counted as a success too.
* Error handler: a batch job that raised is marked failing.
* Death handler: a batch job that died (dead set, discarded, ``retry: False``, killed from
  the API, buried as a poison pill) is marked dead, which may fire ``death`` and ``complete``.

Each of these is one call of the batch script (one round trip), and each is idempotent, so
a job run twice (reliable fetch recovering it after a crash) is counted once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from django_wurk.core.backlog import ride_out
from django_wurk.core.client import capturing, writes_to_redis
from django_wurk.core.control import Cancelled
from django_wurk.core.feature import Plug
from django_wurk.core.features.batches import keys
from django_wurk.core.features.batches.batch import _Block, running_bid
from django_wurk.core.features.batches.script import run
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

logger = logging.getLogger("django_wurk.batches")


def _bid(payload: Any) -> str | None:
    """The payload's bid if it can name a batch; any other ``bid`` (a number, a list, "",
    text no batch id looks like) makes the job a plain job, run and counted by no batch."""
    bid = payload.get("bid") if isinstance(payload, dict) else None
    return bid if isinstance(bid, str) and keys.BID.match(bid) else None


def record(wurk: Wurk, op: str, bid: str, jid: str) -> None:
    """Count an outcome, riding out a short Redis outage (``core.backlog.ride_out``).

    The job has finished; raising here would retry a job that succeeded. So the call is
    retried (it is idempotent) until a deadline, then given up on loudly: the batch will
    not fire until the job runs again. It waits in this thread rather than in a backlog:
    the job is acknowledged only after this returns, so a worker killed meanwhile runs the
    job again and counts it, where a count kept for later would die with the process.
    """

    def give_up(exc: BaseException) -> None:
        logger.critical("could not record %s of job %s in batch %s (%s)", op, jid, bid, exc)
        wurk.report_error(exc, {"context": f"batch {op}", "bid": bid, "jid": jid})

    deadline = time.monotonic() + max(wurk.config.timeout, 5.0) * 4
    try:
        ride_out(lambda: run(wurk, op, bid, jid), deadline, give_up, permanent=(ResponseError,))
    except ResponseError as exc:
        # Redis answered and refused (a key of the batch holds something else): trying again
        # would hold the processor for nothing. The job's own outcome stands.
        logger.warning("could not record %s of job %s in batch %s: %s", op, jid, bid, exc)
    except Exception:
        # Never into the processor: it would count a finished job as failed and run it again.
        logger.error("could not record %s of job %s in batch %s", op, jid, bid, exc_info=True)


class BatchClientMiddleware:
    #: Acts on pushes inside a batch's block (``client_active``: something captures this
    #: context's pushes, and the ContextVar's own ``get`` says so without a Python call)
    #: and on a retried job's re-push (``error_class``); adds ``bid``. Skipped otherwise.
    client_keys = ("error_class",)
    adds_keys = frozenset({"bid"})
    client_active = staticmethod(capturing)

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(
        self, job_class: str, payload: Payload, queue: str, call_next: Callable[[], Payload | None]
    ) -> Payload | None:
        block = capturing()
        if isinstance(block, _Block):
            payload["bid"] = block.bid
        elif "error_class" in payload:
            bid = _bid(payload)
            if bid is not None and writes_to_redis(self.wurk):
                self._rejoin(bid, str(payload.get("jid", "")))
        return call_next()

    def _rejoin(self, bid: str, jid: str) -> None:
        try:
            run(self.wurk, "rejoin", bid, jid)
        except (RedisError, OSError) as exc:
            # The push itself goes on; the job is counted when it finishes either way.
            logger.warning("could not rejoin job %s to batch %s: %s", jid, bid, exc)


class BatchServerMiddleware:
    #: A job without a bid skips this middleware (see ``Chain.invoke``).
    payload_keys = ("bid",)

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        bid = _bid(payload)
        if bid is None:
            call_next()
            return
        token = running_bid.set(bid)
        try:
            call_next()
        except Cancelled:
            # A cancelled job is done with: counted as a success for the batch's completion
            # (docs/batches.md), so a batch with a cancelled job still completes.
            if writes_to_redis(self.wurk):
                logger.info("job %s of batch %s was cancelled: counted as done", payload.get("jid"), bid)
                record(self.wurk, "success", bid, str(payload.get("jid", "")))
            raise
        finally:
            running_bid.reset(token)
        if writes_to_redis(self.wurk):
            record(self.wurk, "success", bid, str(payload.get("jid", "")))


class BatchErrorHandler:
    """Marks a failing batch job (the retry handler decides what happens to it next)."""

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, exc: BaseException, context: dict[str, Any]) -> None:
        bid = _bid(context.get("job"))
        if bid is None or not writes_to_redis(self.wurk):
            return
        try:
            run(self.wurk, "failed", bid, str(context["job"].get("jid", "")))
        except (RedisError, OSError) as error:
            logger.warning("could not mark a failure in batch %s: %s", bid, error)
        except Exception:
            logger.error("could not mark a failure in batch %s", bid, exc_info=True)


class BatchDeathHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payload: Payload, exc: BaseException) -> None:
        bid = _bid(payload)
        if bid is not None and writes_to_redis(self.wurk):
            record(self.wurk, "death", bid, str(payload.get("jid", "")))


def plug(wurk: Wurk) -> Plug:
    """What batches plug into ``wurk``: both middleware, an error and a death handler."""
    return Plug(
        client=BatchClientMiddleware(wurk),
        server=BatchServerMiddleware(wurk),
        on_error=BatchErrorHandler(wurk),
        on_death=BatchDeathHandler(wurk),
    )
