"""The bad-data corpus against the health port: what a scrape and a probe read from Redis.

``/metrics`` reads ``queues``, every ``queue:*`` list's length and oldest job, and the sorted
sets' sizes; ``/ready`` reads process hashes' ``beat`` and ``quiet``. Any value there (names
that are not UTF-8 or hold quotes and newlines, keys of the wrong type, junk jobs, junk
beats) must give an exposition prometheus-client's own parser reads, and a verdict, never
an exception. Job class names reach the labels too, from payloads: same rule, and a flood
of them is capped.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from django_wurk import Wurk
from django_wurk.core.features.observability import exposition, metrics
from django_wurk.core.features.observability.health import heartbeat_verdict
from tests.hostile.corpus import ODD_NAMES, ODD_PROCESSES, load_odd_processes_queues_and_stats


def parsed(text: bytes) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text.decode("utf-8"))}


def test_a_scrape_survives_every_odd_queue_and_set(wurk: Wurk, r: Any) -> None:
    now = time.time()
    load_odd_processes_queues_and_stats(r, now)
    r.sadd("queues", b"wrongtype", b'q"uo\\te\nnl')
    r.hset("queue:wrongtype", "a", "b")
    r.set("retry", "not a zset")
    r.rpush(b'queue:q"uo\\te\nnl', b'{"class":"X","args":[],"enqueued_at":"junk"}')
    families = parsed(exposition.single_process(wurk)()[0])
    sizes = {s.labels["queue"]: s.value for s in families["wurk_queue_size"]}
    assert sizes["wrongtype"] == 0 and sizes['q"uo\\te\nnl'] == 1  # the parser gives the name back
    assert len(sizes) == min(len(set(ODD_NAMES) | {b"wrongtype", b'q"uo\\te\nnl'}), 100)
    assert all(s.value >= 0 for s in families["wurk_queue_latency_seconds"])
    assert families["wurk_retry_set_size"][0].value == 0
    assert families["wurk_redis_up"][0].value == 1


def test_a_probe_gives_a_verdict_for_every_odd_process(wurk: Wurk, r: Any) -> None:
    load_odd_processes_queues_and_stats(r, time.time())
    for identity, _, _ in ODD_PROCESSES:
        ok, why = heartbeat_verdict(r, [identity], 30.0)
        assert isinstance(ok, bool) and why


def test_class_names_that_are_not_utf8_and_a_flood_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_labels", {})
    monkeypatch.setattr(metrics, "_series", {})
    monkeypatch.setattr(metrics, "MAX_SERIES", 5)
    for n in range(20):
        metrics.series(f'Evil\udcff\n"{n}', "q\ud800").processed.inc()
    families = parsed(generate_latest(metrics.REGISTRY))
    classes = {s.labels["class"] for s in families["wurk_jobs_processed"] if s.name.endswith("_total")}
    assert 'Evil\\udcff\n"0' in classes and "(other)" in classes
    assert len([c for c in classes if c.startswith("Evil")]) <= 5


def test_statsd_tags_stay_one_tag_whatever_the_class_name() -> None:
    from django_wurk.core.features.observability.statsd import tag

    for junk in ["a|b", "a,b:c", "x#y", "line\nbreak", "at@rate", "\udcff\ud800", "é" * 3]:
        value = tag(junk)
        assert not set(value) & set("|,#@\n\r") and value.encode("utf-8")


def test_the_statsd_gauges_survive_every_odd_queue_set_and_counter(wurk: Wurk, r: Any) -> None:
    """The leader's StatsD gauges read what a scrape reads, plus the counters and heartbeats:
    every line stays one gauge, and junk reads as 0."""
    from django_wurk.core.features.observability.statsd import Statsd, StatsdGauges, datagrams

    load_odd_processes_queues_and_stats(r, time.time())
    r.sadd("queues", b"wrongtype", b"evil|#queue:x,\nsidekiq.dead:9|g")
    r.hset("queue:wrongtype", "a", "b")
    r.set("retry", "not a zset")
    r.set("stat:processed", b"\xff junk")
    r.delete("stat:failed")
    r.hset("stat:failed", "a", "b")
    lines = StatsdGauges(wurk, Statsd("127.0.0.1", 9), 10.0).lines()
    assert all(line.count("|") in (1, 2) and line.split("|")[1] == "g" for line in lines), lines
    assert all(float(line.split(":", 1)[1].split("|")[0]) >= 0 for line in lines)
    assert {"sidekiq.processed:0|g", "sidekiq.failures:0|g", "sidekiq.retries:0|g"} <= set(lines)
    assert all(len(d.encode()) <= 1400 for d in datagrams(lines))
