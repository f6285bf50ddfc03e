"""How job status plugs into the engine: a push gate, a server middleware, two handlers.

* Push gate: a tracked job really written to Redis (at once, after its transaction's
  commit, from the outbox) is ``enqueued``. A gate rather than client middleware, so a push
  rolled back with its transaction leaves no status behind; promotions from the retry and
  schedule sets pass no gate, so a job waiting for its retry stays ``retrying``.
* Server middleware: ``running`` when an attempt starts, ``succeeded`` with the return
  value when it returns.
* Error handler: ``retrying`` with the error, for every failed attempt.
* Death handler, which the retry handler calls after that when the job is not retried:
  ``dead`` (buried in the dead set) or ``failed`` (discarded, or ``retry=False``).
* ``cancelled`` when ``Cancelled`` passes out of the job (``django_wurk.cancel``): at its
  start, while it ran, or when a job removed from its queue or set is recorded.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.control import Cancelled
from django_wurk.core.feature import Plug
from django_wurk.core.features.status import reporter
from django_wurk.core.features.status.record import (
    CANCELLED,
    DEAD,
    ENQUEUED,
    FAILED,
    RESULT_MAX,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    TRACK,
    error_text,
    now,
    tracked,
    write,
)
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

#: Fields an outcome leaves behind that a new attempt or outcome replaces.
OUTCOME_FIELDS = ("result", "result_withheld", "finished_at")


class StatusGate:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payloads: list[Payload], at: float | None) -> list[Payload]:
        for payload in payloads:
            if TRACK in payload and tracked(payload):  # the lookup spares most jobs the call
                fields = {
                    "state": ENQUEUED,
                    "class": wire.job_display_class(payload),
                    "queue": str(payload.get("queue", "default")),
                    "enqueued_at": now(),
                }
                if at is not None:
                    fields["at"] = repr(float(at))
                write(self.wurk, payload["jid"], fields)
        return payloads


class _Returned:
    """The value a job's ``perform`` returned (awaited, for an async job)."""

    value: Any = None


def _capture(job: Any, box: _Returned) -> None:
    """Wrap this job instance's ``perform`` so its return value lands in ``box``.

    The engine hands middleware no return value (``call_next`` returns nothing in general),
    and this keeps it so: only this instance is touched, for this one run.
    """
    original = job.perform

    async def awaited(value: Awaitable[Any]) -> Any:
        box.value = await value
        return box.value

    def perform(*args: Any, **kwargs: Any) -> Any:
        value = original(*args, **kwargs)
        if inspect.isawaitable(value):
            return awaited(value)
        box.value = value
        return value

    job.perform = perform


def result_fields(payload: Payload, value: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """The fields that keep a return value, and those to drop; never raises."""
    if payload.get("encrypt"):
        return {"result_withheld": "the job's arguments are encrypted: its result is not stored"}, ("result",)
    try:
        text = wire.dumps(value)
    except wire.PayloadError as exc:
        return {"result_withheld": f"not JSON: {type(value).__name__} ({wire.error_message(exc)[:200]})"}, (
            "result",
        )
    size = len(text.encode("utf-8"))
    if size > RESULT_MAX:
        return {"result_withheld": f"too large: {size} bytes of JSON, the most kept is {RESULT_MAX}"}, (
            "result",
        )
    return {"result": text}, ("result_withheld",)


class StatusServerMiddleware:
    payload_keys = (TRACK,)

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        if not tracked(payload):
            call_next()
            return
        jid: str = payload["jid"]
        count = payload.get("retry_count")
        fields = {
            "state": RUNNING,
            "started_at": now(),
            "class": wire.job_display_class(payload),
            "queue": queue,
        }
        if isinstance(count, int) and not isinstance(count, bool):
            fields["retry_count"] = str(count)
        write(self.wurk, jid, fields, drop=OUTCOME_FIELDS)
        status = reporter.StatusReporter(self.wurk, jid)
        box = _Returned()
        _capture(job, box)
        previous = reporter.enter(status)
        try:
            call_next()
        except Cancelled:
            done = {**status.take(), "state": CANCELLED, "finished_at": now()}
            write(self.wurk, jid, done, drop=("result", "result_withheld"))
            raise
        except BaseException:
            status.flush()  # the progress it reached; the error handler writes the failure
            raise
        finally:
            reporter.leave(previous)
        kept, dropped = result_fields(payload, box.value)
        done = {**status.take(), "state": SUCCEEDED, "finished_at": now(), **kept}
        write(self.wurk, jid, done, drop=(*dropped, "error"))


def on_error(wurk: Wurk, exc: BaseException, context: dict[str, Any]) -> None:
    payload = context.get("job")
    if context.get("context") == "Job raised exception" and tracked(payload):
        assert isinstance(payload, dict)
        write(wurk, payload["jid"], {"state": RETRYING, "error": error_text(exc), "finished_at": now()})


def on_death(wurk: Wurk, payload: Payload, exc: BaseException) -> None:
    if not tracked(payload):
        return
    ended = payload.get("discarded_at") is not None or payload.get("retry") is False
    write(
        wurk,
        payload["jid"],
        {"state": FAILED if ended else DEAD, "error": error_text(exc), "finished_at": now()},
    )


class _ErrorHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, exc: BaseException, context: dict[str, Any]) -> None:
        on_error(self.wurk, exc, context)


class _DeathHandler:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payload: Payload, exc: BaseException) -> None:
        on_death(self.wurk, payload, exc)


def plug(wurk: Wurk) -> Plug:
    """What job status plugs into ``wurk``: a gate ("enqueued"), the server middleware
    ("running", "succeeded"), an error handler ("retrying") and a death handler."""
    return Plug(
        server=StatusServerMiddleware(wurk),
        gate=StatusGate(wurk),
        on_error=_ErrorHandler(wurk),
        on_death=_DeathHandler(wurk),
    )
