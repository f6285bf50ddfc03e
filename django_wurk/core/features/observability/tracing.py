"""OpenTelemetry: a span for each enqueue and each execution, joined through the payload.

The client middleware opens a producer span around a push and writes its W3C trace context
into the payload as ``traceparent`` (and ``tracestate``), the keys Sidekiq's OpenTelemetry
instrumentation and wurk use, so a Ruby worker's trace continues ours and the other way
round. The server middleware opens a consumer span around the execution, current while
``perform`` runs (the job's own spans nest under it). A job younger than ``LINK_AFTER``
seconds continues the enqueue's trace as its child; an older one (a retry, a scheduled
job) starts a trace of its own with a link to the enqueue, so one trace never spans days.

Only ``opentelemetry-api`` is needed; without an SDK configured its spans cost nearly
nothing. A push that already carries a ``traceparent`` (a promotion from the retry or
schedule set) keeps it: the job's origin is the first enqueue. Junk in those keys (another
producer's) is ignored, never an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from django_wurk.core import wire
from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

#: Seconds since the job was created after which its span links to the enqueue, not under it.
LINK_AFTER = 60.0
KEYS = ("traceparent", "tracestate")

_propagator = TraceContextTextMapPropagator()
tracer = trace.get_tracer("django_wurk")


def _attributes(job_class: str, payload: Payload, queue: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": "sidekiq",
        "messaging.destination.name": queue,
        "code.namespace": job_class,
    }
    jid = payload.get("jid")
    if isinstance(jid, str):
        attributes["messaging.message.id"] = jid
    return attributes


class TraceClientMiddleware:
    #: Adds the trace context's keys; declared so built-ins beside it can still be skipped.
    adds_keys = frozenset(KEYS)

    def __call__(
        self, job_class: str, payload: Payload, queue: str, call_next: Callable[[], Payload | None]
    ) -> Payload | None:
        if "traceparent" in payload:
            return call_next()
        with tracer.start_as_current_span(
            f"{job_class} publish", kind=SpanKind.PRODUCER, attributes=_attributes(job_class, payload, queue)
        ):
            carrier: dict[str, str] = {}
            _propagator.inject(carrier)
            payload.update((k, carrier[k]) for k in KEYS if k in carrier)
            return call_next()


def _origin(payload: Payload) -> otel_context.Context | None:
    carrier = {k: v for k in KEYS if isinstance(v := payload.get(k), str)}
    if "traceparent" not in carrier:
        return None
    found = _propagator.extract(carrier)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


class TraceServerMiddleware:
    def __call__(self, job: Any, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        job_class = wire.job_display_class(payload)
        origin = _origin(payload)
        parent, links = otel_context.Context(), []
        if origin is not None:
            created = wire.read_stamp(payload.get("created_at")) or wire.read_stamp(
                payload.get("enqueued_at")
            )
            if created is not None and time.time() - created < LINK_AFTER:
                parent = origin
            else:
                links = [Link(trace.get_current_span(origin).get_span_context())]
        with tracer.start_as_current_span(
            f"{job_class} process",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes=_attributes(job_class, payload, queue),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                call_next()
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise


def plug(wurk: Wurk) -> Plug:
    return Plug(client=TraceClientMiddleware(), server=TraceServerMiddleware())


#: Pushes and executions traced. The enqueue span closes once the push is decided, after
#: every other client middleware; the perform span wraps every other server middleware, the
#: counting included, so its time is the whole run's.
FEATURE = Feature(
    "tracing",
    plug,
    client_place=Place(edge="inner"),
    server_place=Place(outside=("metrics", "statsd", "limiters")),
)
