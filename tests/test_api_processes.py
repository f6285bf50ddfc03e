"""Processes and workers: heartbeats read back, signals sent, busy jobs listed.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

import json
from typing import Any

from django_wurk import Wurk
from django_wurk.api import Process, ProcessSet, Stats, Workers
from django_wurk.core import wire
from tests.sidekiq_data import IDENTITY, info_for, payload, write_process
from tests.vectors import raw

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
    r.set("wurk-leader", b)  # the leader key (Config.leader_key), ours by default
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
