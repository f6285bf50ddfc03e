"""Hostile data for the Celery layer: result records and Celery task payloads someone else wrote.

``celery-task-meta-<id>`` may hold any bytes (a Celery worker of another version, a person, an
accident): ``AsyncResult`` must read each as a state, never crash, and re-raise only exception
instances. A job naming a Celery task may carry any ``kwargs``, ``expires_at``, ``retry_count``,
``ignore_result`` or kombu envelope: each must run once, or reach the dead set once, or (when
expired) be skipped with a REVOKED result; never crash a worker, never be lost or run twice.
"""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_wurk.celery import AsyncResult, TimeoutError, shared_task, states
from django_wurk.celery.results import result_key
from django_wurk.core import keys, wire
from tests.hostile.conftest import Fleet, settle
from tests.hostile.corpus import json_values
from tests.hostile.ledger import LoopWatch

CELERY_RUNS = "hostile:celery-runs"

RECORDS: list[bytes] = [
    b"",
    b"\xff\xfe not utf-8",
    b"null",
    b"[]",
    b'"SUCCESS"',
    b"{",
    b"[" * 5000 + b"]" * 5000,
    b'{"status": 5}',
    b'{"status": "NOPE", "result": 1}',
    b'{"status": "SUCCESS"}',
    b'{"status": "SUCCESS", "result": {"__type__": "uuid", "__value__": 5}}',
    b'{"status": "SUCCESS", "result": {"__type__": "datetime", "__value__": "garbage"}}',
    b'{"status": "SUCCESS", "result": {"__type__": "nosuchtype", "__value__": 1}}',
    b'{"status": "FAILURE", "result": null}',
    b'{"status": "FAILURE", "result": "text"}',
    b'{"status": "FAILURE", "result": {"exc_type": "system", "exc_module": "os", "exc_message": ["rm -rf /"]}}',
    b'{"status": "FAILURE", "result": {"exc_type": "SystemExit", "exc_module": "builtins", "exc_message": [1]}}',
    b'{"status": "FAILURE", "result": {"exc_type": "KeyboardInterrupt", "exc_module": "builtins"}}',
    b'{"status": "FAILURE", "result": {"exc_type": "UnicodeDecodeError", "exc_module": "builtins", "exc_message": ["x"]}}',
    b'{"status": "FAILURE", "result": {"exc_type": "1 2", "exc_module": 5, "exc_message": {"a": 1}}}',
    b'{"status": "FAILURE", "result": {"exc_type": "Evil", "exc_module": "not.imported.anywhere"}}',
    b'{"status": "RETRY", "result": [1, 2], "traceback": 7}',
    b'{"status": "REVOKED", "date_done": "not a date"}',
    b'{"status": "SUCCESS", "result": 1, "date_done": 12}',
]


def check_reads(result: AsyncResult) -> None:
    state = result.state
    assert state in states.ALL_STATES
    result.result  # noqa: B018 - must not raise
    result.traceback  # noqa: B018
    result.date_done  # noqa: B018
    assert isinstance(result.ready(), bool) and isinstance(result.successful(), bool)
    try:
        result.get(timeout=0.01, propagate=True, interval=0.01)
    except TimeoutError:
        assert state not in states.READY_STATES
    except Exception as exc:  # a re-raised task error: an exception instance, never a BaseException-only one
        assert state in states.PROPAGATE_STATES, (state, exc)


def test_every_odd_result_record_reads_as_a_state(r: Any) -> None:
    for n, raw in enumerate(RECORDS):
        r.set(result_key(f"odd-{n}"), raw)
        check_reads(AsyncResult(f"odd-{n}"))
    r.set(result_key("wrongtype"), b"x")
    r.delete(result_key("wrongtype"))
    r.hset(result_key("wrongtype"), "status", "SUCCESS")  # another type under the key
    try:
        AsyncResult("wrongtype").state  # noqa: B018
    except Exception as exc:
        assert "WRONGTYPE" in str(exc)  # Redis' own refusal, not a crash of ours


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=st.sampled_from([*sorted(states.ALL_STATES), "X"]), value=json_values(), trace=json_values(4))
def test_generated_result_records_read_as_a_state(r: Any, status: str, value: Any, trace: Any) -> None:
    try:
        raw = json.dumps({"status": status, "result": value, "traceback": trace}).encode(
            "utf-8", "surrogatepass"
        )
    except (ValueError, OverflowError):
        return
    r.set(result_key("generated"), raw)
    check_reads(AsyncResult("generated"))


@shared_task(name="hostile.celery.count")
def count(*args: Any, **kwargs: Any) -> int:
    from django_wurk import wurk

    return int(wurk.redis.hincrby(CELERY_RUNS, str(count.request.id), 1))


ODD_FIELDS: list[dict[str, Any]] = [
    {"kwargs": []},
    {"kwargs": "text"},
    {"kwargs": None},
    {"kwargs": {"a": {"__type__": "uuid", "__value__": 5}}},
    {"kwargs": {"a": {"__type__": "datetime", "__value__": "garbage"}}},
    {"kwargs": {"a": {"__type__": "nosuchtype", "__value__": 1}}},
    {"args": [{"__type__": "decimal", "__value__": "not a number"}]},
    {"args": [{"__type__": "base64", "__value__": "%%%"}]},
    {"expires_at": "soon"},
    {"expires_at": -1e300},
    {"expires_at": 1e300},
    {"expires_at": [1]},
    {"retry_count": "x"},
    {"retry_count": -5},
    {"retry_count": 10**30},
    {"ignore_result": "yes"},
    {"ignore_result": None},
    {"chain": "x"},
    {"chain": [5]},
    {"chain": [{"task": 5}]},
    {"chain": [{"task": "hostile.celery.count", "args": "no list", "options": {"task_id": "no spaces"}}]},
    {"link": "x"},
    {
        "link": [
            5,
            {"task": 5},
            {"task": "hostile.celery.count", "args": "no list", "options": {"task_id": "a b"}},
        ]
    },
    {"link": {"__type__": "nosuchtype", "__value__": 1}},
    {"link_error": [{"task": "hostile.celery.count", "options": {"task_id": "no spaces"}}]},
    {"timeout": "soon"},
    {"timeout": -1},
    {"soft_timeout": [1]},
    {"soft_timeout": 1e300},
    {"kwargs": {"k": 1}, "expires_at": 1},
]


def test_odd_celery_payloads_run_once_or_are_buried_once(r: Any, fleet: Fleet, watch: LoopWatch) -> None:
    now = time.time()
    jids = []
    for n, fields in enumerate(ODD_FIELDS):
        payload = {"retry": 0, "queue": "default", "args": [n], "class": "hostile.celery.count",
                   "jid": f"odd-celery-{n}", "created_at": now, "enqueued_at": now, **fields}  # fmt: skip
        r.lpush(keys.queue("default"), wire.dumps(payload))
        jids.append(payload["jid"])
    r.sadd(keys.QUEUES, "default")
    fleet.start(1)
    problems = settle(r, fleet, "celery corpus")
    problems += fleet.stop()
    assert not problems, problems
    assert not watch.lines, dict(watch.lines)
    runs = {k.decode(): int(v) for k, v in r.hgetall(CELERY_RUNS).items()}
    dead = [json.loads(m)["jid"] for m in r.zrange(keys.DEAD, 0, -1)]
    for jid in jids:
        revoked = AsyncResult(jid).state == states.REVOKED
        traces = runs.get(jid, 0) + dead.count(jid) + int(revoked)
        assert traces == 1, (jid, runs.get(jid), dead.count(jid), revoked)
    assert AsyncResult(f"odd-celery-{len(ODD_FIELDS) - 1}").state == states.REVOKED  # expires_at 1: 1970
    assert "odd-celery-0" in dead and runs.get("odd-celery-8") == 1  # kwargs a list; expiry text
