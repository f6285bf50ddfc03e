"""OpenTelemetry through real worker threads, spans read from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from django_wurk import Wurk
from django_wurk.core.features.observability import tracing
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.jobsapp import jobs

_exporter = InMemorySpanExporter()


@pytest.fixture
def spans(wurk: Wurk) -> Iterator[InMemorySpanExporter]:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
    _exporter.clear()
    wurk.use(tracing.FEATURE)  # undone after the test by the wurk fixture
    yield _exporter


def named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan | None:
    return next((s for s in exporter.get_finished_spans() if s.name == name), None)


def test_the_job_span_continues_the_enqueue_span_in_the_same_trace(
    spans: InMemorySpanExporter, workers: Launcher, r: Any
) -> None:
    with trace.get_tracer("test").start_as_current_span("request") as request:
        jobs.echo.perform_async("traced")
    process = wait_for(lambda: named(spans, "tests.jobsapp.jobs.echo process"), timeout=15)
    publish = named(spans, "tests.jobsapp.jobs.echo publish")
    assert publish is not None and publish.kind == SpanKind.PRODUCER
    assert publish.parent is not None and publish.parent.span_id == request.get_span_context().span_id
    assert process.kind == SpanKind.CONSUMER
    assert process.context.trace_id == request.get_span_context().trace_id
    assert process.parent is not None and process.parent.span_id == publish.context.span_id
    assert process.attributes is not None and process.attributes["messaging.destination.name"] == "default"
    assert process.status.status_code != StatusCode.ERROR


def test_an_old_job_starts_its_own_trace_linked_to_the_enqueue(
    spans: InMemorySpanExporter, workers: Launcher, r: Any
) -> None:
    origin = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    now = time.time()
    payload = {
        "class": "tests.jobsapp.jobs.echo",
        "args": ["old"],
        "jid": "0123456789abcdef01234567",
        "queue": "default",
        "created_at": now - 3600,
        "enqueued_at": now,
        "traceparent": origin,
        "tracestate": "vendor=1",
    }
    r.lpush("queue:default", json.dumps(payload))
    process = wait_for(lambda: named(spans, "tests.jobsapp.jobs.echo process"), timeout=15)
    assert process.parent is None
    assert process.context.trace_id != int("0af7651916cd43dd8448eb211c80319c", 16)
    [link] = process.links
    assert link.context.trace_id == int("0af7651916cd43dd8448eb211c80319c", 16)
    assert link.context.span_id == int("b7ad6b7169203331", 16)


def test_a_failed_job_records_its_error_and_junk_trace_keys_are_ignored(
    spans: InMemorySpanExporter, workers: Launcher, r: Any
) -> None:
    jobs.always_fails.perform_async(7)
    failed = wait_for(lambda: named(spans, "tests.jobsapp.jobs.always_fails process"), timeout=15)
    assert failed.status.status_code == StatusCode.ERROR
    assert any(e.name == "exception" for e in failed.events)

    for n, junk in enumerate(
        [5, "garbage", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", ["x"], "tr\u00e9s" * 1000]
    ):
        body = {
            "class": "tests.jobsapp.jobs.echo",
            "args": [f"junk{n}"],
            "jid": f"junk{n}",
            "queue": "default",
        }
        raw = json.dumps({**body, "traceparent": junk, "tracestate": junk}).encode("utf-8", "surrogatepass")
        r.lpush("queue:default", raw)
    wait_for(lambda: r.llen("seen:echo") >= 5, timeout=15)
    processed = wait_for(
        lambda: (
            len(done := [s for s in spans.get_finished_spans() if s.name.endswith("echo process")]) >= 5
            and done
        ),
        timeout=15,
    )
    assert all(s.parent is None and not s.links for s in processed)


def test_a_push_that_already_carries_a_trace_keeps_it(spans: InMemorySpanExporter, wurk: Wurk) -> None:
    """A promotion from the retry or schedule set: the job's origin is its first enqueue."""
    origin = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    payload = {"class": "tests.jobsapp.jobs.echo", "args": [], "queue": "default", "traceparent": origin}
    prepared = wurk.client.prepare(payload)
    assert prepared is not None and prepared["traceparent"] == origin and "tracestate" not in prepared
    assert named(spans, "tests.jobsapp.jobs.echo publish") is None


def test_the_tracing_setting_installs_both_middleware_in_every_process(tmp_path: Any) -> None:
    """Web processes enqueue and workers perform: the app installs tracing when Django starts."""
    import subprocess
    import sys

    from tests.test_runwurk import ROOT, worker_env

    probe = (
        "import django; django.setup()\n"
        "from django_wurk.core.engine import wurk\n"
        "from django_wurk.core.features.observability.tracing import TraceClientMiddleware as C, "
        "TraceServerMiddleware as S\n"
        "print(C in wurk.client_middleware, S in wurk.server_middleware)\n"
    )
    for value, expected in (("true", "True True"), ("false", "False False")):
        env = worker_env("redis://127.0.0.1:1/0", WURK_TRACING=value)
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
        assert out.stdout.strip() == expected, out.stderr


def test_missing_packages_are_named_by_manage_py_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from django_wurk import checks
    from django_wurk.conf import Settings, use_app_settings

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("opentelemetry", "prometheus_client") else real(name, *a),
    )
    saved = use_app_settings(Settings(health_port=9191, tracing=True))
    try:
        found = {e.id: e.msg for e in checks.check_observability()}
    finally:
        use_app_settings(saved)
    assert "HEALTH_PORT" in found["django_wurk.E006"] and "TRACING" in found["django_wurk.E007"]
