"""The whole data API against Ruby Sidekiq's own report of the same database.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django_wurk import Wurk
from django_wurk.api import DeadSet, ProcessSet, Queue, RetrySet, ScheduledSet, Stats, Workers
from tests.sidekiq_data import IDENTITY, inspect_example, load_snapshot


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
