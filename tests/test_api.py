"""The data API (``django_wurk.core.api``) against a real server, real Sidekiq 6.4.1 bytes included.

Everything is written to Redis by hand (as Ruby Sidekiq would have written it) and read back
through the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from django_wurk import Config, TimestampStyle, Wurk
from django_wurk.api import (
    DeadSet,
    JobRecord,
    Process,
    ProcessSet,
    Queue,
    RetrySet,
    ScheduledSet,
    SortedEntry,
    Stats,
    Workers,
    parse_entry_key,
)
from django_wurk.core import wire
from django_wurk.core.worker.retry import RetryHandler
from tests.vectors import manifest, raw

IDENTITY = "vm:11521:4704a400f737"
RETRY_SCORE = 1795967169.0260518
SCHEDULED_SCORE = 1796053543.7051623
DEAD_KILLED_SCORE = 1795967145.6376019
#: The bytes an API can never decode (not UTF-8, not JSON, not an object, no args).
UNREADABLE = [b"\xff\xfe{not utf-8", b"not json at all", b"[1,2,3]", b'{"class":"NoArgs"}']


# Helpers -------------------------------------------------------------------------------


def payload(n: int = 0, *, queue: str = "default", cls: str = "EchoJob", **extra: Any) -> dict[str, Any]:
    """A 6.4-style job with a recognisable jid (24 hex digits) and ``args == [n]``."""
    body: dict[str, Any] = {"retry": True, "queue": queue, "class": cls, "args": [n], "jid": f"{n:024x}"}
    body["created_at"] = 1795967144.5931814
    body.update(extra)
    return body


def zadd(r: Any, key: str, member: dict[str, Any] | bytes | str, score: float) -> bytes:
    """Store one sorted-set member; returns its exact bytes."""
    data = wire.dumps(member).encode() if isinstance(member, dict) else member
    data = data.encode() if isinstance(data, str) else data
    r.zadd(key, {data: score})
    return data


def lpush(r: Any, queue: str, *members: dict[str, Any] | bytes) -> list[bytes]:
    out = [m if isinstance(m, bytes) else wire.dumps(m).encode() for m in members]
    r.sadd("queues", queue)
    r.lpush(f"queue:{queue}", *out)
    return out


def queue_payloads(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{queue}", 0, -1)]


def bounded(fn: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Call ``fn`` in a thread and fail (rather than hang the suite) if it does not return."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} did not return within {timeout} s"
    if errors:
        raise errors[0]
    return result[0]


def write_process(
    r: Any,
    identity: str,
    info: dict[str, Any] | bytes,
    **fields: Any,
) -> None:
    """A heartbeat as §4 describes it: ``SADD processes`` + the ``<identity>`` hash."""
    r.sadd("processes", identity)
    raw_info = info if isinstance(info, bytes) else wire.dumps(info)
    r.hset(identity, mapping={"info": raw_info, **{k: str(v) for k, v in fields.items()}})
    r.expire(identity, 60)


def info_for(identity: str, **extra: Any) -> dict[str, Any]:
    host, pid, _ = identity.split(":")
    base: dict[str, Any] = {
        "hostname": host,
        "started_at": 1795967145.0219846,
        "pid": int(pid),
        "tag": "",
        "concurrency": 2,
        "queues": ["default"],
        "labels": [],
        "identity": identity,
    }
    base.update(extra)
    return base


def load_snapshot(r: Any) -> dict[str, Any]:
    """Recreate the database Ruby Sidekiq 6.4.1 left behind (redis_keys_snapshot.json)."""
    snapshot: dict[str, Any] = json.loads(raw("redis_keys_snapshot.json"))
    for key, item in snapshot.items():
        kind, value = item["type"], item["value"]
        if kind == "string":
            r.set(key, value)
        elif kind == "list":
            r.rpush(key, *value)
        elif kind == "set":
            r.sadd(key, *value)
        elif kind == "zset":
            r.zadd(key, {member: score for member, score in value})
        elif kind == "hash":
            r.hset(key, mapping=value)
        else:  # pragma: no cover - the snapshot holds only these types
            raise AssertionError(f"unexpected type {kind} for {key}")
    return snapshot


def inspect_example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw("inspect_example.json"))
    return data


# Stats ---------------------------------------------------------------------------------


def test_stats_of_an_empty_database(wurk: Wurk, r: Any) -> None:
    s = Stats(wurk)
    assert (s.processed, s.failed, s.enqueued) == (0, 0, 0)
    assert (s.scheduled_size, s.retry_size, s.dead_size) == (0, 0, 0)
    assert (s.processes_size, s.workers_size) == (0, 0)
    assert s.default_queue_latency == 0.0
    assert s.queues == {}


def test_stats_reads_every_field(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed", 9)
    r.set("stat:failed", 5)
    zadd(r, "schedule", payload(1), 1.0)
    for n in range(2):
        zadd(r, "retry", payload(10 + n), 2.0 + n)
    for n in range(3):
        zadd(r, "dead", payload(20 + n), 3.0 + n)
    write_process(r, "h:1:aaaaaaaaaaaa", info_for("h:1:aaaaaaaaaaaa"), busy=2)
    write_process(r, "h:2:bbbbbbbbbbbb", info_for("h:2:bbbbbbbbbbbb"), busy=3)
    r.sadd("processes", "h:3:cccccccccccc")  # listed, but its hash has expired
    lpush(r, "a", payload(30), payload(31))
    lpush(r, "b", payload(32), payload(33), payload(34))
    lpush(r, "default", payload(35, enqueued_at=time.time()))
    r.sadd("queues", "empty")  # emptied lists stay in `queues`
    r.lpush("queue:orphan", wire.dumps(payload(36)))  # not in `queues`: Sidekiq does not count it

    s = Stats(wurk)
    assert (s.processed, s.failed) == (9, 5)
    assert (s.scheduled_size, s.retry_size, s.dead_size) == (1, 2, 3)
    assert s.processes_size == 3  # SCARD, stale member included, as Sidekiq reports it
    assert s.workers_size == 5  # sum of the hashes' `busy`
    assert s.queues == {"a": 2, "b": 3, "default": 1, "empty": 0}
    assert list(s.queues) == sorted(s.queues)
    assert s.enqueued == 6
    assert 0.0 <= s.default_queue_latency < 5.0


@pytest.mark.parametrize("style", ["float", "ms", "created_at only"])
def test_default_queue_latency_reads_the_oldest_job(wurk: Wurk, r: Any, style: str) -> None:
    now = time.time()
    old: dict[str, Any]
    if style == "float":
        old = payload(1, enqueued_at=now - 30.0)
    elif style == "ms":
        old = payload(1, enqueued_at=int((now - 30.0) * 1000))  # Sidekiq 8 writes int ms
    else:
        old = payload(1, created_at=now - 30.0)
    lpush(r, "default", old)
    lpush(r, "default", payload(2, enqueued_at=now))  # newer, at the head
    latency = Stats(wurk).default_queue_latency
    assert 29.0 < latency < 40.0
    assert Queue("default", wurk).latency() == pytest.approx(latency, abs=2.0)


def test_default_queue_latency_is_zero_for_an_unreadable_or_future_job(wurk: Wurk, r: Any) -> None:
    lpush(r, "default", b"not json")
    assert Stats(wurk).default_queue_latency == 0.0
    r.delete("queue:default")
    lpush(r, "default", payload(1, enqueued_at=time.time() + 100.0))  # clock skew: never negative
    assert Stats(wurk).default_queue_latency == 0.0


def test_history_reads_daily_keys_newest_first(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed:2026-11-29", 9)
    r.set("stat:failed:2026-11-29", 5)
    r.set("stat:processed:2026-11-27", 4)
    r.set("stat:processed:2026-11-26", 100)  # outside the window
    h = Stats.history(days=3, start=date(2026, 11, 29), wurk=wurk)
    assert h == {
        "processed": {"2026-11-29": 9, "2026-11-28": 0, "2026-11-27": 4},
        "failed": {"2026-11-29": 5, "2026-11-28": 0, "2026-11-27": 0},
    }
    assert list(h["processed"]) == ["2026-11-29", "2026-11-28", "2026-11-27"]
    # Month and year boundaries are plain calendar arithmetic.
    r.set("stat:failed:2025-12-31", 7)
    assert Stats.history(days=2, start=date(2026, 1, 1), wurk=wurk)["failed"] == {
        "2026-01-01": 0,
        "2025-12-31": 7,
    }


def test_history_defaults_to_today_in_utc(wurk: Wurk, r: Any) -> None:
    today = datetime.now(UTC).date()
    r.set(f"stat:processed:{today.isoformat()}", 3)
    r.set(f"stat:failed:{(today - timedelta(days=1)).isoformat()}", 2)
    h = Stats.history(2, wurk=wurk)
    assert h["processed"][today.isoformat()] == 3
    assert h["failed"][(today - timedelta(days=1)).isoformat()] == 2
    assert len(Stats.history(wurk=wurk)["processed"]) == 30


@pytest.mark.parametrize("days", [0, -1, 181])
def test_history_refuses_days_outside_the_ui_range(wurk: Wurk, days: int) -> None:
    with pytest.raises(ValueError, match="days"):
        Stats.history(days, wurk=wurk)
    assert len(Stats.history(180, wurk=wurk)["failed"]) == 180


def test_reset_zeroes_the_totals_only(wurk: Wurk, r: Any) -> None:
    r.set("stat:processed", 9)
    r.set("stat:failed", 5)
    r.set("stat:processed:2026-11-29", 9)
    s = Stats(wurk)
    s.reset()
    assert r.get("stat:processed") == b"0" and r.get("stat:failed") == b"0"
    assert r.get("stat:processed:2026-11-29") == b"9"
    fresh = Stats(wurk)
    assert (fresh.processed, fresh.failed) == (0, 0)


# The whole API against Ruby Sidekiq's own report of the same database --------------------


def test_api_reports_what_sidekiq_reported_for_the_snapshot(wurk: Wurk, r: Any) -> None:
    load_snapshot(r)
    expected = inspect_example()

    s = Stats(wurk)
    want = expected["stats"]
    got = {
        "processed": s.processed,
        "failed": s.failed,
        "enqueued": s.enqueued,
        "scheduled_size": s.scheduled_size,
        "retry_size": s.retry_size,
        "dead_size": s.dead_size,
        "processes_size": s.processes_size,
        "workers_size": s.workers_size,
        "default_queue_latency": s.default_queue_latency,
        "queues": s.queues,
    }
    assert got == want

    assert Stats.history(2, start=date(2026, 11, 29), wurk=wurk) == expected["history"]

    queues = Queue.all(wurk)
    assert [q.name for q in queues] == [q["name"] for q in expected["queues"]]
    for q, wq in zip(queues, expected["queues"], strict=True):
        assert q.size() == wq["size"]
        assert q.paused() is wq["paused"]
        jobs = q.page(0, 25)
        assert [j.raw.decode() for j in jobs] == [j["value"] for j in wq["jobs"]]
        for j, wj in zip(jobs, wq["jobs"], strict=True):
            assert (j.jid, j.job_class, j.queue, j.args) == (
                wj["jid"],
                wj["display_class"],
                wj["queue"],
                wj["args"],
            )
            assert j.payload == wj["item"]

    for api_set, name, newest_first in (
        (ScheduledSet(wurk), "scheduled", False),
        (RetrySet(wurk), "retries", False),
        (DeadSet(wurk), "dead", True),  # the dead page lists the newest death first
    ):
        total, entries = api_set.page(0, 25, newest_first=newest_first)
        assert total == expected[name]["size"]
        for e, we in zip(entries, expected[name]["jobs"], strict=True):
            assert e.raw.decode() == we["value"]
            assert e.score == we["score"]
            assert (e.jid, e.job_class, e.queue) == (we["jid"], we["display_class"], we["queue"])
            assert (e.error_class or None, e.error_message or None) == (
                we["error_class"],
                we["error_message"],
            )
            assert e.get("retry_count") == we["retry_count"]
            assert e.failed_at == we["failed_at"] and e.retried_at == we["retried_at"]
            assert e.tags == we["tags"]
            assert api_set.find(e.key) is not None

    [process] = list(ProcessSet(wurk))
    [wp] = expected["processes"]
    assert (process.identity, process.hostname, process.pid, process.tag) == (
        wp["identity"],
        wp["hostname"],
        wp["pid"],
        wp["tag"],
    )
    assert (process.started_at, process.beat, process.busy, process.concurrency) == (
        wp["started_at"],
        wp["beat"],
        wp["busy"],
        wp["concurrency"],
    )
    assert (process.queues, process.stopping, process.rss, process.rtt_us) == (
        wp["queues"],
        wp["stopping"],
        wp["rss"],
        wp["rtt_us"],
    )

    # 6.4.1 wrote the busy hash as `<identity>:workers` (6.4.2+ write `:work`); we read either.
    assert not r.exists(f"{IDENTITY}:work")
    [running] = list(Workers(wurk))
    [ww] = expected["workers"]
    assert (running.identity, running.tid, running.queue, running.run_at) == (
        ww["process_id"],
        ww["thread_id"],
        ww["queue"],
        ww["run_at"],
    )
    assert (running.record.job_class, running.record.jid, running.record.args) == (
        ww["display_class"],
        ww["payload"]["jid"],
        ww["payload"]["args"],
    )
    assert Workers(wurk).size() == expected["workers_size"]


# Queue ---------------------------------------------------------------------------------


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


# Sorted sets: reading ------------------------------------------------------------------


def test_retry_set_reads_sidekiqs_retry_entry(wurk: Wurk, r: Any) -> None:
    data = raw("retry_job.json")
    score = manifest()["files"]["retry_job.json"]["score"]
    assert score == RETRY_SCORE
    r.zadd("retry", {data: score})
    rs = RetrySet(wurk)
    assert rs.size() == 1
    total, [entry] = rs.page()
    assert total == 1
    assert isinstance(entry, SortedEntry)
    assert entry.raw == data
    assert entry.job_class == "FailJob"
    assert entry.jid == "300194a3c6ab2a0c4e8ce1d7"
    assert entry.error_class == "AcceptanceError"
    assert entry.error_message == 'FailJob failed on purpose with args=["A"]'
    assert entry.get("retry_count") == 0
    assert entry.failed_at == 1795967145.0260332
    assert entry.retried_at is None
    assert entry.queue == "default" and entry.args == ["A"]
    assert entry.score == entry.at == RETRY_SCORE
    # The Web UI's address for it: Ruby's shortest float, a dash, the jid.
    assert entry.key == "1795967169.0260518-300194a3c6ab2a0c4e8ce1d7"
    found = rs.find("1795967169.0260518-300194a3c6ab2a0c4e8ce1d7")
    assert found is not None and found.raw == data
    assert rs.find_job("300194a3c6ab2a0c4e8ce1d7") is not None


def test_scheduled_set_reads_sidekiqs_scheduled_entry(wurk: Wurk, r: Any) -> None:
    data = raw("scheduled_job.json")
    score = manifest()["files"]["scheduled_job.json"]["score"]
    r.zadd("schedule", {data: score})
    [entry] = list(ScheduledSet(wurk))
    assert entry.jid == "dd266267bf1721905c20c954" and entry.args == ["later"]
    assert entry.enqueued_at is None  # a scheduled job carries none
    assert entry.created_at == 1795967143.705966
    assert entry.at == SCHEDULED_SCORE
    assert entry.key == f"{SCHEDULED_SCORE!r}-dd266267bf1721905c20c954"
    assert entry.latency > 0  # falls back to created_at


def test_dead_set_reads_sidekiqs_dead_entries_newest_first(wurk: Wurk, r: Any) -> None:
    killed = raw("dead_job_killed.json")
    exhausted = raw("dead_job_retries_exhausted.json")
    r.zadd("dead", {killed: DEAD_KILLED_SCORE, exhausted: 1795967145.0281432})
    total, entries = DeadSet(wurk).page(newest_first=True)
    assert total == 2
    assert [e.raw for e in entries] == [killed, exhausted]
    assert [e.jid for e in entries] == ["6d9c13e5977a3952d6e477bc", "377d35c31742ec2eafed938f"]
    assert [e.get("retry") for e in entries] == [True, 0]
    assert all(e.error_class == "AcceptanceError" and e.get("retry_count") == 0 for e in entries)
    assert entries[1].error_message == 'FailJob failed on purpose with args=["C"]'
    assert [e.jid for e in DeadSet(wurk).page()[1]] == list(reversed([e.jid for e in entries]))


def test_page_orders_by_score_either_way(wurk: Wurk, r: Any) -> None:
    for n in range(1, 6):
        zadd(r, "retry", payload(n), float(n))
    rs = RetrySet(wurk)
    total, oldest = rs.page(0, 3)
    assert total == 5 and [e.score for e in oldest] == [1.0, 2.0, 3.0]
    total, newest = rs.page(0, 3, newest_first=True)
    assert total == 5 and [e.score for e in newest] == [5.0, 4.0, 3.0]
    assert [e.args[0] for e in rs.page(3, 3, newest_first=True)[1]] == [2, 1]
    assert rs.page(5, 3) == (5, [])
    assert all(e.parent is rs for e in oldest)


def test_iterate_walks_past_the_first_hundred(wurk: Wurk, r: Any) -> None:
    r.zadd("schedule", {wire.dumps(payload(n)): 1000.0 + n for n in range(250)})
    ss = ScheduledSet(wurk)
    assert [e.args[0] for e in ss] == list(range(250))
    assert [e.args[0] for e in ss.iterate(newest_first=True)] == list(range(249, -1, -1))
    r.zremrangebyrank("schedule", 200, -1)
    assert len(list(ss)) == 200  # an exact multiple of the page size ends cleanly


def test_iterate_survives_deleting_each_entry_as_it_goes(wurk: Wurk, r: Any) -> None:
    """The docstring's promise: entries removed behind the cursor do not make it skip others."""
    r.zadd("retry", {wire.dumps(payload(n)): 1000.0 + n for n in range(250)})
    seen = []
    for entry in RetrySet(wurk).iterate():
        seen.append(entry.args[0])
        assert entry.delete() is True
    assert seen == list(range(250))
    assert r.zcard("retry") == 0


def test_scan_matches_literally_even_with_glob_characters(wurk: Wurk, r: Any) -> None:
    specials = ["a*b", "axxb", "[x]", "x", "what?", "whatt", "back\\slash", "grüße", "50%_off", "^caret$"]
    for i, text in enumerate(specials):
        zadd(r, "dead", payload(i, note=text), float(i))
    dead = DeadSet(wurk)

    def notes(match: str) -> list[str]:
        return sorted(e.get("note") for e in dead.scan(match))

    assert notes("a*b") == ["a*b"]
    assert notes("[x]") == ["[x]"]
    assert notes("what?") == ["what?"]
    assert notes("grüße") == ["grüße"]
    assert notes("50%_off") == ["50%_off"]
    assert notes("^caret$") == ["^caret$"]
    # The JSON text is searched: a backslash is stored escaped, as `\\`.
    assert notes("back\\\\slash") == ["back\\slash"]
    assert len(list(dead.scan(""))) == len(specials)
    assert list(dead.scan("no such text")) == []
    [entry] = dead.scan('"note":"x"')
    assert entry.score == 3.0 and entry.parent is dead


def test_scan_and_find_job_cover_a_large_set(wurk: Wurk, r: Any) -> None:
    r.zadd("retry", {wire.dumps(payload(n, note=f"item-{n}")): float(n) for n in range(700)})
    rs = RetrySet(wurk)
    hits = list(rs.scan("item-69"))  # item-69 and item-690..699
    assert sorted(e.args[0] for e in hits) == [69, *range(690, 700)]
    found = rs.find_job(f"{555:024x}")
    assert found is not None and found.score == 555.0
    assert rs.find_job("f" * 24) is None


def test_find_job_ignores_a_jid_that_only_appears_in_args(wurk: Wurk, r: Any) -> None:
    target = "abcdefabcdefabcdefabcdef"
    zadd(r, "retry", payload(1, other=target), 1.0)
    assert RetrySet(wurk).find_job(target) is None
    zadd(r, "retry", payload(2, jid=target), 2.0)
    found = RetrySet(wurk).find_job(target)
    assert found is not None and found.args == [2]


def test_fetch_returns_every_entry_at_a_score(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", payload(1), 5.5)
    zadd(r, "retry", payload(2), 5.5)
    zadd(r, "retry", payload(3), 5.6)
    rs = RetrySet(wurk)
    assert sorted(e.args[0] for e in rs.fetch(5.5)) == [1, 2]
    [only] = rs.fetch(5.5, f"{2:024x}")
    assert only.args == [2]
    assert rs.fetch(5.5, f"{3:024x}") == []
    assert rs.fetch(7.0) == []


@pytest.mark.parametrize("score", [RETRY_SCORE, 0.1 + 0.2, 1795966991.5853264, 1767225600.0, 12.0])
def test_find_addresses_an_entry_by_ruby_float_and_jid(wurk: Wurk, r: Any, score: float) -> None:
    zadd(r, "retry", payload(1), score)
    zadd(r, "retry", payload(2), score)  # shares the score: the jid picks one
    zadd(r, "retry", payload(3), score + 1)
    rs = RetrySet(wurk)
    key = f"{score!r}-{2:024x}"
    entry = rs.find(key)
    assert entry is not None and entry.args == [2] and entry.key == key
    assert rs.find(f"{score!r}-{3:024x}") is None  # right jid, wrong score
    assert rs.find(f"{score + 1!r}-{3:024x}") is not None


def test_find_on_a_vanished_entry_returns_none(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "retry", payload(1), RETRY_SCORE)
    key = f"{RETRY_SCORE!r}-{1:024x}"
    assert RetrySet(wurk).find(key) is not None
    r.zrem("retry", member)
    assert RetrySet(wurk).find(key) is None
    assert RetrySet(wurk).delete(key) is False


@pytest.mark.parametrize("bad", ["", "1795967169.0260518", "1795967169.0260518-", "abc-def", "-jid"])
def test_malformed_entry_keys_are_refused(wurk: Wurk, bad: str) -> None:
    with pytest.raises(ValueError):
        RetrySet(wurk).find(bad)


def test_parse_entry_key_splits_at_the_first_dash() -> None:
    assert parse_entry_key("1795967169.0260518-300194a3c6ab2a0c4e8ce1d7") == (
        1795967169.0260518,
        "300194a3c6ab2a0c4e8ce1d7",
    )
    assert parse_entry_key("12.5-a-b") == (12.5, "a-b")


# Sorted sets: changing -----------------------------------------------------------------


def test_delete_by_key_and_by_entry(wurk: Wurk, r: Any) -> None:
    zadd(r, "dead", payload(1), 10.0)
    kept = zadd(r, "dead", payload(2), 10.0)
    dead = DeadSet(wurk)
    assert dead.delete(f"10.0-{1:024x}") is True
    assert dead.delete(f"10.0-{1:024x}") is False
    [entry] = dead.fetch(10.0)
    assert entry.raw == kept
    assert entry.delete() is True and entry.delete() is False
    assert dead.size() == 0


def test_unreadable_sorted_entries_are_listed_and_deletable(wurk: Wurk, r: Any) -> None:
    for i, data in enumerate(UNREADABLE):
        zadd(r, "retry", data, float(i))
    rs = RetrySet(wurk)
    entries = list(rs)
    assert [e.raw for e in entries] == UNREADABLE
    assert all(e.payload is None and e.job_class == "(unreadable payload)" for e in entries)
    # No jid: a digest of the exact bytes stands in for it, so each key finds its own entry.
    assert all(re.fullmatch(rf"{float(i)!r}-raw:[0-9a-f]{{32}}", e.key) for i, e in enumerate(entries))
    assert all(rs.find(e.key).raw == e.raw for e in entries)  # type: ignore[union-attr]
    assert list(rs.scan("not json")) and rs.find_job("x") is None
    assert all(e.delete() for e in entries)
    assert rs.size() == 0


def test_add_to_queue_pushes_onto_the_payloads_queue(wurk: Wurk, r: Any) -> None:
    data = raw("scheduled_job.json")
    r.zadd("schedule", {data: SCHEDULED_SCORE})
    zadd(r, "schedule", payload(9, queue="critical"), SCHEDULED_SCORE + 1)
    ss = ScheduledSet(wurk)
    first, second = list(ss)
    before = time.time()
    assert first.add_to_queue() is True
    assert second.add_to_queue() is True
    assert r.smembers("queues") == {b"default", b"critical"}
    [pushed] = queue_payloads(r, "default")
    original = json.loads(data)
    # Unchanged apart from a fresh enqueued_at (a float, Sidekiq 6/7 style).
    assert {k: v for k, v in pushed.items() if k != "enqueued_at"} == original
    assert isinstance(pushed["enqueued_at"], float) and before <= pushed["enqueued_at"] <= time.time()
    assert "at" not in pushed
    assert [p["jid"] for p in queue_payloads(r, "critical")] == [f"{9:024x}"]
    assert ss.size() == 0
    # A second click finds it gone and pushes nothing.
    assert first.add_to_queue() is False
    assert r.llen("queue:default") == 1


def test_add_to_queue_writes_millisecond_stamps_when_configured(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(timestamps=TimestampStyle.INT_MILLISECONDS))
    zadd(wurk.redis, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.add_to_queue() is True
    [pushed] = queue_payloads(wurk.redis)
    assert isinstance(pushed["enqueued_at"], int)
    assert abs(pushed["enqueued_at"] / 1000 - time.time()) < 5


def test_add_to_queue_goes_through_client_middleware(wurk: Wurk, r: Any) -> None:
    class Stamp:
        def __call__(self, job_class: str, p: dict[str, Any], queue: str, call_next: Any) -> Any:
            p["stamped"] = job_class
            return call_next()

    wurk.client_middleware.add(Stamp)
    zadd(r, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.add_to_queue() is True
    [pushed] = queue_payloads(r)
    assert pushed["stamped"] == "EchoJob" and pushed["jid"] == f"{1:024x}"


def test_retry_lowers_retry_count_and_requeues(wurk: Wurk, r: Any) -> None:
    data = raw("retry_job.json")
    r.zadd("retry", {data: RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    before = time.time()
    assert entry.retry() is True
    assert r.zcard("retry") == 0
    assert r.smembers("queues") == {b"default"}
    [stored] = r.lrange("queue:default", 0, -1)
    pushed = json.loads(stored)
    original = json.loads(data)
    assert pushed["retry_count"] == original["retry_count"] - 1 == -1
    assert before <= pushed["enqueued_at"] <= time.time()
    unchanged = {k for k in original if k not in ("retry_count", "enqueued_at")}
    assert {k: pushed[k] for k in unchanged} == {k: original[k] for k in unchanged}
    assert list(pushed) == list(original)  # no key added, order kept
    assert entry.retry() is False  # it has gone
    assert r.llen("queue:default") == 1


def test_manual_retry_then_failure_matches_sidekiq(wurk: Wurk, r: Any) -> None:
    """retry_job.json -> "Retry Now" -> fails again == retry_job_after_manual_retry.json (README)."""

    class AcceptanceError(Exception):
        pass

    r.zadd("retry", {raw("retry_job.json"): RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    assert entry.retry() is True
    fetched = r.rpop("queue:default")
    outcome = RetryHandler(wurk).handle(
        fetched, "default", None, AcceptanceError('FailJob failed on purpose with args=["A"]')
    )
    assert outcome == "retry"
    [(stored, _)] = r.zrange("retry", 0, -1, withscores=True)
    ours = json.loads(stored)
    ruby = json.loads(raw("retry_job_after_manual_retry.json"))
    assert list(ours) == list(ruby)  # same keys, same order
    stamps = ("enqueued_at", "retried_at")
    assert {k: v for k, v in ours.items() if k not in stamps} == {
        k: v for k, v in ruby.items() if k not in stamps
    }
    assert ours["retry_count"] == 0 and ours["failed_at"] == ruby["failed_at"]
    assert ours["retried_at"] >= ours["enqueued_at"]


def test_retry_keeps_a_missing_retry_count_missing(wurk: Wurk, r: Any) -> None:
    zadd(r, "dead", payload(1), 5.0)
    [entry] = list(DeadSet(wurk))
    assert entry.retry() is True
    [pushed] = queue_payloads(r)
    assert "retry_count" not in pushed and r.zcard("dead") == 0


def test_retry_of_a_vanished_entry_pushes_nothing(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "retry", payload(1, queue="somewhere", retry_count=3), 5.0)
    [entry] = list(RetrySet(wurk))
    r.zrem("retry", member)  # another tab (or the poller) got there first
    assert entry.retry() is False
    assert r.exists("queue:somewhere") == 0
    assert r.smembers("queues") == set()
    assert entry.add_to_queue() is False and r.exists("queue:somewhere") == 0


def test_retry_and_add_to_queue_leave_unreadable_entries(wurk: Wurk, r: Any) -> None:
    for i, data in enumerate(UNREADABLE):
        zadd(r, "retry", data, float(i))
        zadd(r, "schedule", data, float(i))
    for entry in RetrySet(wurk):
        assert entry.retry() is False
    for entry in ScheduledSet(wurk):
        assert entry.add_to_queue() is False
    assert r.zcard("retry") == r.zcard("schedule") == len(UNREADABLE)
    assert r.smembers("queues") == set()


def _record_deaths(wurk: Wurk) -> list[tuple[dict[str, Any], BaseException]]:
    deaths: list[tuple[dict[str, Any], BaseException]] = []
    wurk.death_handlers.append(lambda p, exc: deaths.append((p, exc)))
    return deaths


def test_kill_moves_the_entry_to_dead_unchanged(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    data = raw("retry_job.json")
    r.zadd("retry", {data: RETRY_SCORE})
    [entry] = list(RetrySet(wurk))
    before = time.time()
    assert entry.kill() is True
    assert r.zcard("retry") == 0
    [(member, score)] = r.zrange("dead", 0, -1, withscores=True)
    assert member == data  # byte for byte, as Sidekiq's kill leaves it
    assert before <= score <= time.time()
    [(p, exc)] = deaths
    assert p == json.loads(data)
    assert type(exc) is RuntimeError and str(exc) == "Job killed by API"
    # Gone now: a second kill does nothing and tells no one.
    assert entry.kill() is False
    assert len(deaths) == 1 and r.zcard("dead") == 1


def test_kill_from_the_schedule_and_of_a_dead_entry(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "schedule", payload(1), 5.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.kill() is True
    [dead] = list(DeadSet(wurk))
    assert dead.kill() is False  # already dead
    assert DeadSet(wurk).size() == 1 and len(deaths) == 1


def test_kill_of_an_unreadable_entry_moves_it_without_death_handlers(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "retry", b"not json at all", 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    assert r.zrange("dead", 0, -1) == [b"not json at all"]
    assert deaths == []


def test_kill_keeps_invalid_utf8_bytes(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", b"\xff\xfe{not utf-8", 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    assert r.zrange("dead", 0, -1) == [b"\xff\xfe{not utf-8"]


def test_dead_set_is_trimmed_by_count(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(dead_max_jobs=3))
    r = wurk.redis
    now = time.time()
    for n in range(5):
        zadd(r, "dead", payload(n), now - 50 + n)
    zadd(r, "retry", payload(99), 5.0)
    [entry] = list(RetrySet(wurk))
    assert entry.kill() is True
    # ZREMRANGEBYRANK dead 0 -3: as in Sidekiq, dead_max_jobs - 1 entries survive, newest first.
    assert [e.args[0] for e in DeadSet(wurk).page(newest_first=True)[1]] == [99, 4]


def test_dead_set_is_trimmed_by_age(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.replace(dead_timeout=100))
    r = wurk.redis
    now = time.time()
    zadd(r, "dead", payload(1), now - 1000)  # older than dead_timeout
    zadd(r, "dead", payload(2), now - 50)
    DeadSet(wurk).kill(payload(3), notify=False)
    assert sorted(e.args[0] for e in DeadSet(wurk)) == [2, 3]


def test_dead_set_kill_adds_a_payload_and_notifies(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    before = time.time()
    DeadSet(wurk).kill(payload(1))
    DeadSet(wurk).kill(wire.dumps(payload(2)), notify=False)
    entries = list(DeadSet(wurk))
    assert [e.raw for e in entries] == [wire.dumps(payload(1)).encode(), wire.dumps(payload(2)).encode()]
    assert all(before <= e.score <= time.time() for e in entries)
    [(p, exc)] = deaths
    assert p == payload(1) and str(exc) == "Job killed by API"


def test_retry_all_skips_unreadable_entries_and_terminates(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", b"not json at all", 0.5)  # rank 0: the drain must step over it
    for n in range(150):
        zadd(r, "retry", payload(n, retry_count=2), 1.0 + n)
    zadd(r, "retry", b"\xff{", 75.5)  # and over one in the middle
    assert bounded(RetrySet(wurk).retry_all) == 150
    assert r.zrange("retry", 0, -1) == [b"not json at all", b"\xff{"]
    pushed = queue_payloads(r)
    assert len(pushed) == 150 and {p["retry_count"] for p in pushed} == {1}
    # Oldest first, so the queue runs them in their original order.
    assert [p["args"][0] for p in reversed(pushed)] == list(range(150))


def test_kill_all_moves_everything_including_unreadable(wurk: Wurk, r: Any) -> None:
    deaths = _record_deaths(wurk)
    zadd(r, "retry", b"not json at all", 0.5)
    for n in range(120):
        zadd(r, "retry", payload(n), 1.0 + n)
    assert bounded(RetrySet(wurk).kill_all) == 121
    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 121
    assert b"not json at all" in r.zrange("dead", 0, -1)
    assert len(deaths) == 120


def test_kill_all_on_the_dead_set_does_nothing(wurk: Wurk, r: Any) -> None:
    for n in range(3):
        zadd(r, "dead", payload(n), float(n))
    assert bounded(DeadSet(wurk).kill_all) == 0
    assert r.zcard("dead") == 3


def test_add_all_to_queue_moves_every_readable_entry(wurk: Wurk, r: Any) -> None:
    for n in range(130):
        zadd(r, "schedule", payload(n, queue="low" if n % 2 else "high"), 1000.0 + n)
    zadd(r, "schedule", b'{"class":"NoArgs"}', 999.0)
    assert bounded(ScheduledSet(wurk).add_all_to_queue) == 130
    assert r.zrange("schedule", 0, -1) == [b'{"class":"NoArgs"}']
    assert r.llen("queue:low") == r.llen("queue:high") == 65
    assert r.smembers("queues") == {b"low", b"high"}
    assert all("enqueued_at" in p for p in queue_payloads(r, "low"))


def test_drain_of_an_empty_set_is_zero(wurk: Wurk) -> None:
    assert RetrySet(wurk).retry_all() == 0
    assert RetrySet(wurk).kill_all() == 0
    assert ScheduledSet(wurk).add_all_to_queue() == 0


def test_reschedule_moves_an_entry_in_time(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "schedule", payload(1), 100.0)
    [entry] = list(ScheduledSet(wurk))
    assert entry.reschedule(200.5) is True
    assert r.zscore("schedule", member) == 200.5
    assert entry.reschedule(200.5) is True  # still there, just not moved
    r.zrem("schedule", member)
    assert entry.reschedule(300.0) is False  # gone: not re-added
    assert r.zcard("schedule") == 0


def test_clear_empties_only_that_set(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", payload(1), 1.0)
    zadd(r, "dead", payload(2), 1.0)
    RetrySet(wurk).clear()
    assert r.exists("retry") == 0 and r.zcard("dead") == 1
    DeadSet(wurk).clear()
    ScheduledSet(wurk).clear()
    assert r.dbsize() == 0


# Processes -----------------------------------------------------------------------------


def test_process_set_reads_heartbeats(wurk: Wurk, r: Any) -> None:
    a, b, gone = "alpha:10:aaaaaaaaaaaa", "beta:20:bbbbbbbbbbbb", "gamma:30:cccccccccccc"
    write_process(
        r,
        a,
        info_for(a, concurrency=5, tag="web", queues=["critical", "default"]),
        busy=2,
        beat="1795967170.0320656",
        quiet="false",
        rss=30780,
        rtt_us=55,
        concurrency=8,  # 8.1.3+ hash field wins over info
    )
    write_process(r, b, info_for(b, concurrency=3), busy=0, beat="1795967171.5", quiet="true")
    r.sadd("processes", gone)  # its hash expired
    ps = ProcessSet(wurk)
    assert ps.identities() == [a, b, gone]
    assert ps.size() == 3
    pa, pb = list(ps)
    assert isinstance(pa, Process)
    assert (pa.identity, pa.hostname, pa.pid, pa.tag) == (a, "alpha", 10, "web")
    assert pa.queues == ["critical", "default"]
    assert pa.started_at == 1795967145.0219846
    assert (pa.busy, pa.beat, pa.rss, pa.rtt_us) == (2, 1795967170.0320656, 30780, 55)
    assert pa.concurrency == 8 and pa.info["concurrency"] == 5
    assert pa.stopping is False
    assert (pb.concurrency, pb.stopping, pb.busy, pb.rss, pb.rtt_us) == (3, True, 0, 0, 0)
    assert ps.total_concurrency() == 11
    assert pa.leader is False
    r.set("dear-leader", b)
    assert pb.leader is True and pa.leader is False


def test_process_set_reads_sidekiqs_process_info(wurk: Wurk, r: Any) -> None:
    info = raw("process_info.json")
    write_process(r, IDENTITY, info, busy=1, beat="1795967170.0320656", quiet="false", rss=30780, rtt_us=55)
    [p] = list(ProcessSet(wurk))
    assert (p.identity, p.hostname, p.pid, p.tag) == (IDENTITY, "vm", 11521, "")
    assert p.concurrency == 2  # 6.4 writes it only inside info
    assert p.queues == ["default", "activejob"]
    assert p.info["identity"] == IDENTITY and p.info["labels"] == []


def test_process_with_unreadable_info_is_still_listed(wurk: Wurk, r: Any) -> None:
    write_process(r, "h:1:aaaaaaaaaaaa", b"{broken", busy=1, concurrency=4)
    write_process(r, "h:2:bbbbbbbbbbbb", b"\xff", busy=1)
    p1, p2 = list(ProcessSet(wurk))
    assert (p1.info, p1.concurrency, p1.busy, p1.hostname, p1.pid, p1.queues) == ({}, 4, 1, "", 0, [])
    assert (p2.info, p2.concurrency) == ({}, 0)


def test_empty_process_set(wurk: Wurk) -> None:
    ps = ProcessSet(wurk)
    assert (list(ps), ps.size(), ps.total_concurrency(), ps.identities()) == ([], 0, 0, [])


def test_quiet_stop_and_dump_push_signals_with_a_ttl(wurk: Wurk, r: Any) -> None:
    identity = "alpha:10:aaaaaaaaaaaa"
    write_process(r, identity, info_for(identity), busy=0)
    [p] = list(ProcessSet(wurk))
    p.quiet()
    key = f"{identity}-signals"
    assert r.lrange(key, 0, -1) == [b"TSTP"]
    assert 0 < r.ttl(key) <= 60
    p.stop()
    p.dump_threads()
    # LPUSH: the process RPOPs the oldest first.
    assert r.lrange(key, 0, -1) == [b"TTIN", b"TERM", b"TSTP"]
    assert r.rpop(key) == b"TSTP"
    assert 0 < r.ttl(key) <= 60


def test_quiet_all_and_stop_all_signal_every_live_process(wurk: Wurk, r: Any) -> None:
    live = ["a:1:aaaaaaaaaaaa", "b:2:bbbbbbbbbbbb"]
    for identity in live:
        write_process(r, identity, info_for(identity), busy=0)
    r.sadd("processes", "c:3:cccccccccccc")
    ProcessSet(wurk).quiet_all()
    ProcessSet(wurk).stop_all()
    for identity in live:
        assert r.lrange(f"{identity}-signals", 0, -1) == [b"TERM", b"TSTP"]
        assert 0 < r.ttl(f"{identity}-signals") <= 60
    assert r.exists("c:3:cccccccccccc-signals") == 0


# Workers -------------------------------------------------------------------------------


def test_workers_read_string_and_object_payloads(wurk: Wurk, r: Any) -> None:
    write_process(r, IDENTITY, raw("process_info.json"), busy=2)
    entry = raw("worker_entry.json")  # 6.4.1's bytes: the payload is a JSON string
    as_object = json.loads(entry)
    as_object["payload"] = payload(7, queue="low")  # 8.x readers accept an object too
    as_object["queue"] = "low"
    r.hset(f"{IDENTITY}:work", mapping={"8ih": entry, "9zz": wire.dumps(as_object), "aaa": "{broken"})
    first, second = list(Workers(wurk))
    assert (first.identity, first.tid, first.queue, first.run_at) == (IDENTITY, "8ih", "default", 1795967167)
    assert first.record.job_class == "SleepJob"
    assert first.record.jid == "a8b9964e1c73b50d3d6d48ca" and first.record.args == [20]
    assert first.record.enqueued_at == 1795967167.0572636
    assert first.record.raw == json.loads(entry)["payload"].encode()
    assert (second.tid, second.queue, second.record.args) == ("9zz", "low", [7])
    assert second.record.payload == payload(7, queue="low")
    assert Workers(wurk).size() == 2


def test_workers_size_sums_busy_across_processes(wurk: Wurk, r: Any) -> None:
    write_process(r, "a:1:aaaaaaaaaaaa", info_for("a:1:aaaaaaaaaaaa"), busy=3)
    write_process(r, "b:2:bbbbbbbbbbbb", info_for("b:2:bbbbbbbbbbbb"), busy=4)
    r.sadd("processes", "c:3:cccccccccccc")  # no hash: counts as 0
    assert Workers(wurk).size() == 7
    assert list(Workers(wurk)) == []  # no busy-work hashes written
    assert Stats(wurk).workers_size == 7


def test_workers_of_an_empty_cluster(wurk: Wurk) -> None:
    assert list(Workers(wurk)) == [] and Workers(wurk).size() == 0
