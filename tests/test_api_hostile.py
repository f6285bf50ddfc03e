"""The data API over keys no worker writes that way (issue 10, found by the bad-data corpus).

``tests/hostile`` pushes a whole corpus through the API; these pin down, one by one, the
cases it found: a process identity whose key is not a hash, a busy-work key that is not a
hash, a queue whose name is not UTF-8, and entries without a jid, which need a key of their
own so ``find`` can address each of them.
"""

from __future__ import annotations

from typing import Any

from django_wurk import Wurk
from django_wurk.core import wire
from django_wurk.core.api import (
    DeadSet,
    ProcessSet,
    Queue,
    RetrySet,
    ScheduledSet,
    Stats,
    Workers,
    queue_summaries,
)
from tests.sidekiq_data import info_for, payload, write_process, zadd

LIVE = "live:1:000000000001"


def live_process(r: Any) -> None:
    write_process(r, LIVE, info_for(LIVE), busy=1, beat="1795967145.5", concurrency=4)
    r.hset(
        f"{LIVE}:work", "t1", wire.dumps({"queue": "default", "payload": wire.dumps(payload(1)), "run_at": 1})
    )


def test_a_process_whose_key_is_not_a_hash_is_skipped_as_dead(wurk: Wurk, r: Any) -> None:
    """Not a hash means no worker beats there: the process is gone, and the rest still reads."""
    live_process(r)
    r.sadd("processes", "odd:list", "odd:string", "odd:set")
    r.rpush("odd:list", "x")
    r.set("odd:string", "\xff")
    r.sadd("odd:set", "x")
    assert [p.identity for p in ProcessSet(wurk)] == [LIVE]
    assert ProcessSet(wurk).total_concurrency() == 4
    assert Workers(wurk).size() == 1
    assert [j.identity for j in Workers(wurk)] == [LIVE]
    stats = Stats(wurk)
    assert stats.workers_size == 1 and stats.processes_size == 4


def test_a_busy_work_key_that_is_not_a_hash_lists_no_jobs(wurk: Wurk, r: Any) -> None:
    live_process(r)
    other = "other:2:000000000002"
    write_process(r, other, info_for(other), busy=0, beat="1795967145.5")
    r.set(f"{other}:work", "not a hash")
    r.rpush(f"{other}:workers", "not a hash either")
    assert [(j.identity, j.tid) for j in Workers(wurk)] == [(LIVE, "t1")]


BINARY = b"\xff\xfe binary \x00"


def test_a_queue_whose_name_is_not_utf8_shows_and_acts_on_its_own_jobs(wurk: Wurk, r: Any) -> None:
    """Decoding the name with replacement characters named another, empty list: the jobs hid."""
    jobs = [wire.dumps(payload(i)).encode() for i in range(3)]
    r.sadd("queues", BINARY, "default")
    r.rpush(b"queue:" + BINARY, *jobs)
    r.rpush("queue:default", jobs[0])
    by_name = {q.name: q for q in Queue.all(wurk)}
    queue = by_name[BINARY.decode("utf-8", "replace")]
    assert queue.size() == 3 and [rec.raw for rec in queue] == jobs
    assert queue.find_job(f"{1:024x}") is not None
    assert {s.name: s.size for s in queue_summaries(wurk)} == {queue.name: 3, "default": 1}
    stats = Stats(wurk)
    assert stats.queues == {queue.name: 3, "default": 1} and stats.enqueued == 4
    assert queue.pause() is True and r.sismember("paused", BINARY) and queue.paused()
    assert queue.unpause() is True and not r.sismember("paused", BINARY)
    assert queue.delete_job(next(iter(queue))) is True and r.llen(b"queue:" + BINARY) == 2
    queue.clear()
    assert not r.exists(b"queue:" + BINARY) and r.smembers("queues") == {b"default"}


def test_a_queue_named_by_bytes_or_text_is_the_same_queue(wurk: Wurk, r: Any) -> None:
    r.rpush("queue:mailers", wire.dumps(payload(1)))
    assert Queue(b"mailers", wurk).size() == 1 and Queue("mailers", wurk).size() == 1
    assert Queue(b"mailers", wurk).name == "mailers" and Queue(b"mailers", wurk).key == "queue:mailers"


#: Entries with no jid to address them by: unreadable, or a payload without (or with an empty) jid.
NO_JID = [b"\xff not utf-8", b"not json", b'{"class":"X","args":[]}', b'{"class":"X","args":[],"jid":""}']


def test_entries_without_a_jid_each_have_a_key_that_finds_them(wurk: Wurk, r: Any) -> None:
    """All at one score: a key ``<score>-`` could only ever name the first of them."""
    for cls in (ScheduledSet, RetrySet, DeadSet):
        sset = cls(wurk)
        for score in (-5.5, 0.0, float("inf"), float("-inf"), 1795967169.0260518):
            for raw in NO_JID:
                zadd(r, sset.name, raw, score)
            zadd(r, sset.name, payload(7), score)
            entries = sset.fetch(score)
            entry_keys = [e.key for e in entries]
            assert len(set(entry_keys)) == len(NO_JID) + 1
            for entry in entries:
                found = sset.find(entry.key)
                assert found is not None and found.raw == entry.raw, entry.key
            # Deleting by key removes exactly the entry the key names.
            victim = next(e for e in entries if e.raw == NO_JID[1])
            assert sset.delete(victim.key) is True and sset.delete(victim.key) is False
            assert sorted(e.raw for e in sset.fetch(score)) == sorted(
                e.raw for e in entries if e is not victim
            )
            r.delete(sset.name)


def test_the_key_of_an_entry_without_a_jid_names_nothing_once_it_is_gone(wurk: Wurk, r: Any) -> None:
    zadd(r, "dead", b"not json", 10.0)
    [entry] = DeadSet(wurk).fetch(10.0)
    r.delete("dead")
    zadd(r, "dead", b"not json either", 10.0)
    assert DeadSet(wurk).find(entry.key) is None


def test_retry_and_add_to_queue_leave_an_entry_whose_queue_names_no_queue(wurk: Wurk, r: Any) -> None:
    """As the poller buries such an entry, "Retry now"/"Add to queue" refuse it (False) rather
    than push it to a list named after a list."""
    for cls in (ScheduledSet, RetrySet, DeadSet):
        sset = cls(wurk)
        for n, queue in enumerate((["default"], 5, {"x": 1})):
            zadd(r, sset.name, payload(n, queue=queue), 10.0 + n)  # type: ignore[arg-type]
        for entry in sset:
            assert (entry.add_to_queue() if cls is ScheduledSet else entry.retry()) is False
        assert sset.size() == 3
    assert [k for k in r.scan_iter(match="queue:*")] == []
