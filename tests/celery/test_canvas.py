"""chain, group and chord on real workers: chains in the payload, groups and chords on batches."""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_wurk import BatchStatus
from django_wurk.celery import GroupResult, chain, chord, group, states
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.conftest import queue_entries, wait_for


def test_a_chain_feeds_each_result_to_the_next(celery_workers: Launcher) -> None:
    result = chain(tasks.add.s(1, 2), tasks.add.s(10), tasks.multiply.s(2)).apply_async()
    assert result.get(timeout=10) == 26  # (1 + 2 + 10) * 2
    assert result.parent is not None and result.parent.get(timeout=1) == 13
    assert result.parent.parent.get(timeout=1) == 3
    assert (tasks.add.s(2, 2) | tasks.add.si(5, 5)).delay().get(timeout=10) == 10  # immutable: ignores 4


def test_the_rest_of_a_chain_rides_in_the_payload(wurk: Any, r: Any) -> None:
    result = chain(tasks.add.s(1, 2), tasks.record.s("k")).apply_async()
    [payload] = queue_entries(r)
    [step] = payload["chain"]
    assert step["task"] == "tests.celery.celery_style_tasks.record" and step["args"] == ["k"]
    assert step["options"]["task_id"] == result.id  # every id chosen up front
    json.dumps(payload)


def test_a_failed_step_ends_the_chain(celery_workers: Launcher) -> None:
    result = chain(tasks.boom.s("stop"), tasks.record.s("never")).apply_async()
    with pytest.raises(ValueError):
        result.parent.get(timeout=10)
    assert result.state == states.PENDING and "never" not in tasks.CALLS


def test_a_group_runs_as_one_batch(celery_workers: Launcher) -> None:
    result = group(tasks.add.s(i, i) for i in range(5)).apply_async()
    assert isinstance(result, GroupResult) and len(result) == 5
    assert result.get(timeout=10) == [0, 2, 4, 6, 8]
    assert result.ready() and result.successful() and result.completed_count() == 5
    status = BatchStatus(result.id)
    wait_for(lambda: BatchStatus(result.id).complete)
    assert status.total == 5


def test_a_chord_calls_its_body_with_the_headers_results_in_order(celery_workers: Launcher) -> None:
    result = chord([tasks.add.s(i, 1) for i in range(4)])(tasks.collect.s("sum"))
    assert result.get(timeout=15) == [1, 2, 3, 4]
    assert tasks.CALLS["sum"] == [[1, 2, 3, 4]]
    assert isinstance(result.parent, GroupResult) and result.parent.get(timeout=1) == [1, 2, 3, 4]


def test_a_chord_whose_header_fails_never_calls_its_body(celery_workers: Launcher, r: Any) -> None:
    result = chord([tasks.add.s(1, 1), tasks.boom.s("header")], tasks.collect.s("body")).apply_async()
    wait_for(lambda: BatchStatus(result.parent.id).complete)
    assert BatchStatus(result.parent.id).failures == 1
    assert result.state == states.PENDING and "body" not in tasks.CALLS


def test_a_celery_messages_embedded_chain_goes_on(celery_workers: Launcher) -> None:
    """What wurk_drain_celery hands over: Celery keeps the chain's next step last."""
    last = tasks.multiply.s(2).set(task_id="last-step")
    middle = tasks.add.s(10).set(task_id="middle-step")
    tasks.add.apply_async((1, 2), chain=[dict(last), dict(middle)])
    from django_wurk.celery import AsyncResult

    assert AsyncResult("last-step").get(timeout=10) == 26
    assert AsyncResult("middle-step").get(timeout=1) == 13


def test_a_handed_over_chain_keeps_how_to_call_each_step_and_drops_celerys_bookkeeping(r: Any) -> None:
    from django_wurk.celery.canvas import UnsupportedWorkflow

    step = {"task": "t.b", "args": [1], "kwargs": {}, "subtask_type": None, "immutable": True,
            "options": {"task_id": "b-id", "queue": "math", "countdown": 5, "reply_to": "x", "priority": 3,
                        "time_limit": 30, "soft_time_limit": None}}  # fmt: skip
    tasks.add.apply_async((1, 2), chain=[step])
    [payload] = queue_entries(r)
    assert payload["chain"] == [{"task": "t.b", "args": [1], "kwargs": {}, "subtask_type": None,
                                 "immutable": True,
                                 "options": {"task_id": "b-id", "countdown": 5, "queue": "math",
                                             "time_limit": 30}}]  # fmt: skip
    for bad in ({**step, "subtask_type": "chord"}, {**step, "options": {"link": [step]}}, "t.b",
                {**step, "options": {"time_limit": "soon"}}):  # fmt: skip
        with pytest.raises(UnsupportedWorkflow, match="chain="):
            tasks.add.apply_async((1, 2), chain=[bad])
