"""Batches over data someone else wrote: one focused test per case the batch corpus found
(``tests/hostile/test_corpus_batches.py`` walks the whole corpus; these pin each fix)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from django_wurk import BatchStatus, Wurk
from django_wurk.core.features.batches import BatchSet, keys
from django_wurk.core.features.batches.middleware import record
from django_wurk.core.features.batches.script import CALLBACK_JOB, run
from tests.dashboard.conftest import url


def ours(r: Any, bid: str, jid: str = "j1", **fields: str) -> None:
    """A batch as the script writes it, one live job, and ``fields`` over its hash."""
    r.hset(keys.batch(bid), mapping={"wurk": "1", "created_at": repr(time.time()), "total": "1",
                                     "pending": "1", "parent_bid": "", **fields})  # fmt: skip
    r.sadd(keys.jids(bid), jid)
    r.zadd(keys.INDEX, {bid: time.time()})


def strict(raw: bytes) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(token)

    return json.loads(raw, parse_constant=refuse)


# Reading --------------------------------------------------------------------------------------


def test_a_batch_key_of_another_type_reads_as_absent(wurk: Wurk, r: Any) -> None:
    ours(r, "wrongtypekids1")
    r.set(keys.kids("wrongtypekids1"), "not a set")
    r.hset(keys.callbacks("wrongtypekids1"), "x", "y")
    status = BatchStatus("wrongtypekids1", wurk)
    assert (status.exists, status.child_count, status.child_bids, status.callbacks) == (True, 0, [], [])
    r.set(keys.batch("wrongtypehash1"), "not a hash")
    assert not BatchStatus("wrongtypehash1", wurk).exists


def test_a_callback_entry_too_deep_for_the_policy_is_skipped(wurk: Wurk, r: Any) -> None:
    ours(r, "deepcallback01")
    r.rpush(keys.callbacks("deepcallback01"), '["complete","a.B",' + "[" * 100_000 + "]" * 100_000 + "]")
    r.rpush(keys.callbacks("deepcallback01"), '["complete","a.B",{"n":NaN}]', '["complete","a.B",{}]')
    assert [c.target for c in BatchStatus("deepcallback01", wurk).callbacks] == ["a.B"]


def test_counters_past_any_real_count_read_as_zero(wurk: Wurk, r: Any) -> None:
    ours(r, "hugecounters01", total="9" * 400, pending="-5")
    status = BatchStatus("hugecounters01", wurk)
    assert (status.total, status.pending) == (0, 0)


def test_search_steps_over_a_batch_hash_of_another_type(wurk: Wurk, r: Any) -> None:
    ours(r, "findme00000001", description="findme")
    r.set(keys.batch("wrongtypehash2"), "not a hash")
    r.zadd(keys.INDEX, {"wrongtypehash2": time.time() + 1})
    assert [s.bid for s in BatchSet(wurk).search("findme")] == ["findme00000001"]


# Dashboard ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_list_shows_an_index_member_that_is_no_bid_without_a_link(admin_client: Client, r: Any) -> None:
    ours(r, "goodbatch00001")
    r.zadd(keys.INDEX, {"a/b": time.time(), "": time.time()})
    response = admin_client.get(url("batches"))
    assert response.status_code == 200
    assert url("batch", bid="goodbatch00001") in response.content.decode()


@pytest.mark.django_db
def test_a_batch_page_with_junk_jids_children_and_parent_answers(admin_client: Client, r: Any) -> None:
    ours(r, "junkmembers001", parent_bid="a/b")
    for key in (keys.failed("junkmembers001"), keys.died("junkmembers001"), keys.kids("junkmembers001")):
        r.sadd(key, "", "a/b", "ok")
    assert admin_client.get(url("batch", bid="junkmembers001")).status_code == 200


@pytest.mark.django_db
def test_status_json_with_a_400_digit_total_is_strict_json(admin_client: Client, r: Any) -> None:
    ours(r, "hugecounters02", total="9" * 400, pending="9" * 400)
    response = admin_client.get(url("batch_status", bid="hugecounters02"))
    assert response.status_code == 200
    assert strict(response.content)["total"] == 0


@pytest.mark.django_db
def test_status_json_answers_json_for_a_malformed_bid(admin_client: Client) -> None:
    response = admin_client.get(url("batches") + "a%20b/status.json")
    assert response.status_code == 404
    assert strict(response.content) == {"error": "not_a_batch_id"}


# Counting (the batch script) -------------------------------------------------------------------


def test_counting_in_a_batch_whose_key_holds_another_type_gives_up_at_once(wurk: Wurk, r: Any) -> None:
    """Before: WRONGTYPE was retried like an outage, holding the processor for 20 s."""
    r.set(keys.batch("wrongtypehash3"), "not a hash")
    ours(r, "wrongtypejids1")
    r.delete(keys.jids("wrongtypejids1"))
    r.set(keys.jids("wrongtypejids1"), "not a set")
    started = time.monotonic()
    for bid in ("wrongtypehash3", "wrongtypejids1"):
        for op in ("success", "death"):
            record(wurk, op, bid, "j1")
    assert time.monotonic() - started < 2.0
    assert r.get(keys.jids("wrongtypejids1")) == b"not a set"  # someone else's key, left alone


def test_a_junk_pending_counter_is_recounted_and_the_batch_still_fires(wurk: Wurk, r: Any) -> None:
    ours(r, "junkpending001", pending="abc", linger="1e400")
    r.rpush(keys.callbacks("junkpending001"), '["success","a.B",{}]')
    assert run(wurk, "success", "junkpending001", "j1") == 1
    status = BatchStatus("junkpending001", wurk)
    assert (status.pending, status.complete, status.succeeded) == (0, True, True)


def test_callback_jobs_built_from_redis_strings_are_strict_json_without_injected_fields(
    wurk: Wurk, r: Any
) -> None:
    ours(r, "injection00001", callback_queue='default","class":"Evil')
    entries = ['["complete","q\\"uote",{}]', '["complete","a.B",{}] trailing', '["complete","a.B",NaN]',
               '["complete","a\\\\",{}]', '["complete","a.B",{"k":1}]']  # fmt: skip
    r.rpush(keys.callbacks("injection00001"), *entries)
    assert run(wurk, "success", "injection00001", "j1") == 1
    assert [k for k in r.scan_iter(match="queue:*") if k != b"queue:default"] == []
    jobs = [strict(raw) for raw in reversed(r.lrange("queue:default", 0, -1))]
    assert {(job["class"], job["queue"]) for job in jobs} == {(CALLBACK_JOB, "default")}
    # The well-formed entry goes verbatim; the broken one as its text, for the job to refuse.
    assert jobs[-1]["args"] == ["injection00001", ["complete", "a.B", {"k": 1}]]
    assert jobs[1]["args"] == ["injection00001", '["complete","a.B",{}] trailing']
