"""The bad-data corpus against historical metrics: junk in ``history:metrics`` and in what the
leader's snapshot reads.

The recorder (a leader duty) and the reader (``History``, the dashboard's History page) must
survive every value there: a junk entry reads as unknown counts, never an exception; a stream
key of another type, or an entry dated in the future, is logged once and recording skipped
until it is fixed (never deleted behind the operator's back); junk members of the queues the
snapshot measures still give a snapshot.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk
from django_wurk.api import History
from django_wurk.core import keys as core_keys
from django_wurk.core.features.history import keys
from django_wurk.core.features.history.recorder import Recorder
from tests.dashboard.conftest import url
from tests.hostile.corpus import members

DAY = 86_400.0
ME = "host:1:a"


def recorder(wurk: Wurk, interval: float = 30) -> Recorder:
    wurk.redis.set(core_keys.LEADER, ME, ex=60)
    return Recorder(wurk, ME, interval, DAY)


def read_everything(wurk: Wurk) -> list[Any]:
    rows = History(wurk).recent(30 * DAY)
    for row in rows:
        for name in keys.COUNTS:
            value = getattr(row, name)
            assert value is None or (isinstance(value, int) and value >= 0)
        for q in row.queues:
            assert isinstance(q.name, str) and q.size >= 0 and 0 <= q.latency < float("inf")
        assert isinstance(row.leader, str) and len(row.leader) <= 200
    History(wurk).latest()
    History(wurk).size()
    return rows


def test_every_corpus_value_in_every_field_reads_and_the_recorder_writes_after_it(
    wurk: Wurk, r: Any, admin_client: Client
) -> None:
    values = [m.raw[:200_000] for m in members("history", time.time(), flavours=(True,), huge_mb=(1,))]
    fields = (*keys.COUNTS, "queues", "leader", "v")
    s, _ = r.time()
    base = (int(s) - 600) * 1000
    for n, value in enumerate(values):
        r.xadd(
            keys.STREAM,
            {fields[n % len(fields)]: value, fields[(n + 3) % len(fields)]: value},
            id=f"{base + n}-0",
        )
    rows = read_everything(wurk)
    assert len(rows) == len(values)
    assert recorder(wurk).record() is not None
    assert read_everything(wurk)[-1].leader == ME
    response = admin_client.get(url("history") + "?period=24h")
    assert response.status_code == 200 and b"<script>" not in response.content


def test_junk_in_the_queues_the_snapshot_measures_still_gives_a_snapshot(wurk: Wurk, r: Any) -> None:
    raws = [m.raw for m in members("history-queues", time.time(), flavours=(True,), huge_mb=(1,))]
    r.rpush(core_keys.queue("default"), *raws[:200])
    r.sadd(core_keys.QUEUES, "default", b"\xff\xfe", "x" * 10_000, "<script>", "a\nb")
    r.rpush(b"queue:\xff\xfe", b"\x00junk")
    r.set(core_keys.STAT_PROCESSED, "not a number")
    r.set(core_keys.STAT_FAILED, "9" * 400)
    assert recorder(wurk).record() is not None
    [row] = read_everything(wurk)
    assert row.processed == 0 and row.failed == 0  # Stats reads junk counters as 0
    assert max(len(q.name) for q in row.queues) == keys.MAX_NAME  # a 10,000-character name is cut
    assert row.queue("default") is not None and row.queue("default").size == min(len(raws), 200)  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["string", "list", "hash", "set", "zset"])
def test_a_stream_key_of_another_type_is_logged_once_and_left_alone(
    wurk: Wurk, r: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    writers = {
        "string": lambda: r.set(keys.STREAM, "x"),
        "list": lambda: r.rpush(keys.STREAM, "x"),
        "hash": lambda: r.hset(keys.STREAM, "x", "y"),
        "set": lambda: r.sadd(keys.STREAM, "x"),
        "zset": lambda: r.zadd(keys.STREAM, {"x": 1}),
    }
    writers[kind]()
    rec = recorder(wurk, interval=0.01)
    with caplog.at_level(logging.ERROR, "django_wurk.history"):
        assert rec.record() is None and rec.record() is None
    assert caplog.text.count("not a stream") == 1
    assert r.type(keys.STREAM).decode() == kind  # never deleted
    assert read_everything(wurk) == [] and History(wurk).size() == 0


def test_an_entry_dated_in_the_future_is_reported_not_a_crash(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    r.xadd(keys.STREAM, {"processed": "1"}, id="99999999999999-0")  # year 5138
    with caplog.at_level(logging.ERROR, "django_wurk.history"):
        assert recorder(wurk).record() is None
    assert "in the future" in caplog.text
    assert [row.processed for row in History(wurk).recent(DAY)] == []  # outside any window read
    assert History(wurk).latest() is None
    r.xadd(keys.STREAM, {"processed": "2"}, id="18446744073709551615-0")  # the largest ID there is
    assert History(wurk).latest() is None  # no datetime holds it: skipped
    read_everything(wurk)


@pytest.mark.parametrize("kind", ["retry", "dead", "schedule", "processes", "queues"])
def test_a_set_the_snapshot_counts_of_another_type_skips_the_snapshot_once_logged(
    wurk: Wurk, r: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    r.set(kind, "not a set")
    rec = recorder(wurk, interval=0.01)
    with caplog.at_level(logging.ERROR, "django_wurk.history"):
        assert rec.record() is None and rec.record() is None
    assert caplog.text.count("another type") == 1
    r.delete(kind)
    assert rec.record() is not None


@pytest.mark.parametrize(
    "junk",
    [
        lambda r: r.set(core_keys.LEADER, b"\xff" * 100_000),
        lambda r: r.rpush(core_keys.LEADER, ME),
        lambda r: r.hset(core_keys.LEADER, ME, ME),
    ],
    ids=["huge-binary", "list", "hash"],
)
def test_a_junk_leader_key_means_no_snapshot_and_no_error(wurk: Wurk, r: Any, junk: Any) -> None:
    junk(r)
    assert Recorder(wurk, ME, 30, DAY).record() is None
    assert not r.exists(keys.STREAM)
