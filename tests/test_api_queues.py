"""Queues and the job records read from them: sizes, paging, search, deletion, unreadable entries.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk import Wurk
from django_wurk.api import JobRecord, Queue
from django_wurk.core import keys, wire
from tests.sidekiq_data import UNREADABLE, lpush, payload
from tests.vectors import raw


def test_queue_all_lists_the_queues_set_sorted(wurk: Wurk, r: Any) -> None:
    r.sadd("queues", "zeta", "alpha", "mid")
    assert [q.name for q in Queue.all(wurk)] == ["alpha", "mid", "zeta"]
    assert all(q.key == f"queue:{q.name}" for q in Queue.all(wurk))
    assert Queue.all(wurk)[0].size() == 0


def test_queue_size_paused_and_latency(wurk: Wurk, r: Any) -> None:
    q = Queue("work", wurk)
    assert (q.size(), q.latency(), q.paused()) == (0, 0.0, False)
    lpush(r, "work", payload(1, enqueued_at=time.time() - 60.0), payload(2, enqueued_at=time.time()))
    assert q.size() == 2
    assert 59.0 < q.latency() < 70.0
    r.sadd("paused", "work")
    assert q.paused() is True and Queue("other", wurk).paused() is False


def test_queue_page_and_iteration_are_newest_first(wurk: Wurk, r: Any) -> None:
    for n in range(250):
        lpush(r, "big", payload(n, queue="big"))  # pushed one by one: 249 is the newest
    q = Queue("big", wurk)
    assert [j.args[0] for j in q.page()] == list(range(249, 224, -1))  # 25 by default
    assert [j.args[0] for j in q.page(1, 2)] == [248, 247]
    assert [j.args[0] for j in q.page(249, 25)] == [0]
    assert q.page(250, 25) == []
    everything = [j.args[0] for j in q]
    assert everything == list(range(249, -1, -1))
    assert all(j.queue == "big" for j in q.page(0, 3))


def test_queue_iteration_ends_on_an_exact_multiple_of_the_page(wurk: Wurk, r: Any) -> None:
    lpush(r, "hundred", *[payload(n, queue="hundred") for n in range(100)])
    assert len(list(Queue("hundred", wurk))) == 100
    assert list(Queue("nothing", wurk)) == []


def test_queue_iteration_survives_deleting_jobs_behind_the_cursor(wurk: Wurk, r: Any) -> None:
    lpush(r, "big", *[payload(n, queue="big") for n in range(230)])
    q = Queue("big", wurk)
    seen = []
    for record in q:
        seen.append(record.args[0])
        if record.args[0] % 2 == 0:
            assert q.delete_job(record) is True
    assert seen == list(range(229, -1, -1))
    assert [j.args[0] for j in q] == list(range(229, -1, -2))


def test_find_job_searches_every_page(wurk: Wurk, r: Any) -> None:
    lpush(r, "big", *[payload(n, queue="big") for n in range(230)])
    q = Queue("big", wurk)
    found = q.find_job(f"{3:024x}")  # near the tail: on the third page
    assert found is not None and found.args == [3]
    assert q.find_job("0" * 23 + "z") is None


def test_find_job_reads_only_what_can_hold_the_jid_and_still_finds_escaped_ones(wurk: Wurk, r: Any) -> None:
    """The bytes are looked at before any job is decoded; a jid JSON writes with \\u escapes
    (legal, if no client does it) is found all the same, past the first thousand jobs."""
    escaped = b'{"class":"X","args":[7],"jid":"\\u0061bc\\u0031","queue":"big"}'
    r.lpush(keys.queue("big"), escaped)
    lpush(r, "big", *[payload(n, queue="big") for n in range(1500)])
    q = Queue("big", wurk)
    found = q.find_job("abc1")
    assert found is not None and found.raw == escaped
    assert q.find_job(f"{1200:024x}").args == [1200]  # type: ignore[union-attr]
    assert q.find_job("abc2") is None and q.find_job("a b/c") is None


def test_delete_job_removes_exactly_those_bytes(wurk: Wurk, r: Any) -> None:
    body = payload(1)
    same_job_other_bytes = json.dumps(body).encode()  # same jid, Python's default spacing
    [canonical] = lpush(r, "default", body)
    lpush(r, "default", same_job_other_bytes, payload(2))
    q = Queue("default", wurk)
    record = next(j for j in q if j.raw == canonical)
    assert q.delete_job(record) is True
    assert r.lrange("queue:default", 0, -1) == [wire.dumps(payload(2)).encode(), same_job_other_bytes]
    assert q.delete_job(record) is False  # already gone


def test_clear_removes_the_list_and_the_name(wurk: Wurk, r: Any) -> None:
    lpush(r, "doomed", payload(1), payload(2))
    lpush(r, "kept", payload(3))
    Queue("doomed", wurk).clear()
    assert r.exists("queue:doomed") == 0
    assert r.smembers("queues") == {b"kept"}
    assert Queue("kept", wurk).size() == 1
    assert [q.name for q in Queue.all(wurk)] == ["kept"]


def test_unreadable_queue_entries_are_listed_and_deletable(wurk: Wurk, r: Any) -> None:
    lpush(r, "default", payload(1, enqueued_at=time.time()))
    stored = lpush(r, "default", *UNREADABLE)
    q = Queue("default", wurk)
    records = q.page(0, 10)
    assert len(records) == 5
    bad = records[:4]
    assert [b.raw for b in bad] == list(reversed(stored))
    for b in bad:
        assert b.payload is None and b.error
        assert b.job_class == "(unreadable payload)"
        assert (b.jid, b.args, b.display_args, b.tags, b.backtrace) == ("", [], [], [], [])
        assert (b.enqueued_at, b.latency, b.queue) == (None, 0.0, "default")
    assert "UTF-8" in bad[3].error  # the first pushed: invalid UTF-8
    assert records[4].jid == f"{1:024x}"
    assert q.find_job(f"{1:024x}") is not None
    for b in bad:
        assert q.delete_job(b) is True
    assert q.size() == 1


def test_unreadable_oldest_entry_has_zero_latency(wurk: Wurk, r: Any) -> None:
    lpush(r, "default", b"\xff")
    lpush(r, "default", payload(1, enqueued_at=time.time() - 100))
    assert Queue("default", wurk).latency() == 0.0


def test_job_record_reads_a_real_activejob_payload(wurk: Wurk, r: Any) -> None:
    data = raw("queue_job_activejob.json")
    r.lpush("queue:vectors_aj", data)
    [record] = Queue("vectors_aj", wurk).page()
    assert record.raw == data
    assert record.job_class == "MyRailsJob"
    assert record.jid == "4c195ff39914790fa8e42912"
    assert record.args[0]["job_class"] == "MyRailsJob"
    # ActiveJob's own arguments, without the `_aj_*` markers.
    assert record.display_args == ["aj", 2, {}]
    assert record.enqueued_at == 1795967143.4439647 and record.created_at == 1795967143.4439154
    assert "MyRailsJob" in repr(record) and record.jid in repr(record)


def test_job_record_display_of_encrypted_args_tags_and_backtrace() -> None:
    lines = ["app/jobs/hard_job.rb:7:in `perform'", "sidekiq/processor.rb:220:in `execute_job'"]
    body = payload(
        1,
        encrypt=True,
        tags=["alpha", 2],
        display_class="Shown",
        error_backtrace=wire.encode_backtrace(lines),
    )
    body["args"] = [1, "secret-blob"]
    rec = JobRecord(wire.dumps(body).encode())
    assert rec.display_args == [1, "[encrypted data]"]
    assert rec.args == [1, "secret-blob"]
    assert rec.tags == ["alpha", "2"]
    assert rec.job_class == "Shown"
    assert rec.backtrace == lines
    # Sidekiq 6.x wraps the base64 at 60 columns; it reads the same.
    wrapped = "eJyLVkosKNDPyk8q1s9ILEqJB7L0ipKszK0y8xQSClKL0vKLctWVdJSKM1NS\nszML9QuK8pNTi4vzi0CqjIwMwOpSK1KTS0tSQZrVlWIBzP4dJw==\n"
    assert JobRecord(wire.dumps(payload(1, error_backtrace=wrapped)).encode()).backtrace == lines
