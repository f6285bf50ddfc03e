"""The bad-data corpus against the Celery broker drain: every hostile value on a broker list.

The drain reads lists another system writes (the Celery broker), so each corpus value (not
UTF-8, not JSON, too deep, huge, Sidekiq payloads that are no kombu envelope...) sits on the
broker's ``celery`` list between real Celery messages. Each must reach wurk's dead set exactly
once, with a readable reason and its bytes recoverable; the real messages around them must
become jobs; the broker must end empty; and the drain must end normally.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import redis as redis_lib

from django_wurk import Wurk
from tests import test_celery_drain as drain_tests
from tests.hostile.corpus import members
from tests.hostile.ledger import readable_reason
from tests.test_celery_drain import broker_lists, drain, jobs

# The broker and the Celery producer, as the drain's own tests set them up.
broker_server = drain_tests.broker_server
broker_url = drain_tests.broker_url
broker = drain_tests.broker
celery_app = drain_tests.celery_app


def test_every_corpus_value_on_the_broker_is_buried_once_and_the_drain_goes_on(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    corpus = members("celery-drain", time.time(), flavours=(True,), huge_mb=(1,))
    before = celery_app.legacy_add.delay(1, 2)
    for member in corpus:
        broker.lpush("celery", member.raw)
    after = celery_app.legacy_add.delay(3, 4)

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead, tally.skipped) == (2, len(corpus), 0)
    assert set(jobs(r)) == {before.id, after.id}
    kept: dict[bytes, int] = {}
    for raw in r.zrange("dead", 0, -1):
        entry = json.loads(raw)
        assert readable_reason(entry) is None, entry
        original = (
            base64.b64decode(entry["payload_base64"])
            if "payload_base64" in entry
            else entry["args"][0].encode()
        )
        kept[original] = kept.get(original, 0) + 1
    expected: dict[bytes, int] = {}
    for member in corpus:
        expected[member.raw] = expected.get(member.raw, 0) + 1
    assert kept == expected
    assert broker_lists(broker) == {}


def test_a_hostile_embedded_chain_keeps_its_message_in_the_dead_set(
    wurk: Wurk, r: Any, broker: redis_lib.Redis, broker_url: str, celery_app: Any
) -> None:
    """A message's ``embed["chain"]`` is another system's data too: whatever it holds, the
    message becomes a job whose chain can go on, or is buried whole with the reason."""
    step = {"task": "legacy.append", "args": ["b"], "kwargs": {}, "options": {}, "subtask_type": None}
    chains: list[Any] = [
        "rest", 5, {"task": "legacy.append"}, [None], [5], [{"task": 5}], [{"task": ""}],
        [{**step, "subtask_type": "chord"}], [{**step, "args": "b"}], [{**step, "kwargs": [1]}],
        [{**step, "options": [1]}], [{**step, "options": {"link": [step]}}],
        [{**step, "options": {"countdown": "soon"}}], [{**step, "options": {"eta": "next tuesday"}}],
        [{**step, "options": {"expires": [1]}}], [{**step, "options": {"task_id": "has space"}}],
        [{**step, "options": {"queue": "no spaces"}}], [step] * 2 + [{"task": None}],
    ]  # fmt: skip
    celery_app.send_task("legacy.append", args=[[], "a"])
    template = json.loads(broker.lpop("celery"))
    for index, rest in enumerate(chains):
        message = dict(template, properties={**template["properties"], "delivery_tag": f"hostile-{index}"})
        body = json.loads(base64.b64decode(template["body"]))
        body[2] = {**body[2], "chain": rest}
        message["body"] = base64.b64encode(json.dumps(body).encode()).decode()
        broker.lpush("celery", json.dumps(message))
    good = celery_app.send_task("legacy.append", args=[[], "a"], chain=[step])

    tally = drain(wurk, broker_url)

    assert (tally.moved, tally.dead, tally.skipped) == (1, len(chains), 0)
    assert set(jobs(r)) == {good.id}
    buried = [json.loads(x) for x in r.zrange("dead", 0, -1)]
    assert {e["error_class"] for e in buried} == {"UnsupportedCeleryWorkflow"}
    assert all(readable_reason(e) is None for e in buried)
    assert broker_lists(broker) == {}
