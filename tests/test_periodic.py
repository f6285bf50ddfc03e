"""Periodic jobs, in process: loop ids, registration, the claim, the ticker's clock, the data API.

The ticker is driven with a chosen ``now`` ("a unit test drives the clock"); every Redis
call is real. Times are in the past of the real clock on purpose: the claim script also
checks, on Redis's own clock, that an occurrence is due.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from django_wurk import Wurk
from django_wurk.api import Loop, LoopFire, LoopSet, current_leader
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.loops import LoopSpec, format_stamp, prune, register
from django_wurk.core.features.periodic.ticker import Ticker
from tests.jobsapp import jobs


class EveryMinutes:
    """A stand-in schedule for these tests: every ``step`` minutes on the minute (UTC)."""

    def __init__(self, step: int = 1) -> None:
        self.step = step
        self.expression = f"*/{step} * * * *"

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        base = moment.astimezone(UTC).replace(second=0, microsecond=0)
        candidate = base + timedelta(minutes=1)
        while candidate.minute % self.step:
            candidate += timedelta(minutes=1)
        return candidate


#: 2020-01-01T00:00:00Z: in the past, so Redis's clock agrees every occurrence is due.
T0 = datetime(2020, 1, 1, tzinfo=UTC).timestamp()


def spec(step: int = 1, **kw: Any) -> LoopSpec:
    return LoopSpec(EveryMinutes(step), jobs.echo.job_class, **kw)


def queued(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{queue}", 0, -1)]


def test_lid_is_stable_and_changes_with_what_fires() -> None:
    a = spec(args=(1, "x"), queue="low")
    assert a.lid == spec(args=(1, "x"), queue="low").lid
    assert len(a.lid) == 16 and int(a.lid, 16) >= 0
    others = [
        spec(2, args=(1, "x"), queue="low"),
        spec(args=(1, "y"), queue="low"),
        spec(args=(1, "x")),
        spec(args=(1, "x"), queue="low", retry=3),
        spec(args=(1, "x"), queue="low", tz=ZoneInfo("Europe/Berlin")),
        LoopSpec(EveryMinutes(1), jobs.async_echo.job_class, args=(1, "x"), queue="low"),
    ]
    assert len({a.lid, *(o.lid for o in others)}) == 7
    # The documented formula, so other tools can compute it.
    import hashlib

    text = '*/1 * * * *|tests.jobsapp.jobs.echo|{"args":[1,"x"],"queue":"low","tz":"UTC"}'
    assert a.lid == hashlib.sha1(text.encode()).hexdigest()[:16]


def test_a_bad_override_is_refused_when_the_spec_is_made() -> None:
    with pytest.raises(ValueError, match="queue"):
        spec(queue="no spaces allowed")
    with pytest.raises(ValueError, match="retry"):
        spec(retry=-1)
    with pytest.raises(TypeError, match="JSON-native"):
        spec(args=(object(),))


def test_registration_is_idempotent_and_keeps_pause_and_next_fire(wurk: Wurk, r: Any) -> None:
    s = spec()
    register(r, s, T0)
    first = r.hgetall(keys.loop(s.lid))
    assert first[b"nf"] == format_stamp(T0 + 60).encode() and first[b"paused"] == b"0"
    assert first[b"klass"] == b"tests.jobsapp.jobs.echo" and first[b"schedule"] == b"*/1 * * * *"
    assert r.smembers(keys.PERIODIC) == {s.lid.encode()}
    loop = LoopSet(wurk).get(s.lid)
    assert loop is not None and loop.pause()
    register(r, s, T0 + 3600)  # a later deploy registers again
    again = r.hgetall(keys.loop(s.lid))
    assert again[b"paused"] == b"1" and again[b"nf"] == first[b"nf"]
    assert r.smembers(keys.PERIODIC) == {s.lid.encode()}


def test_a_leader_prunes_loops_not_in_its_configuration(wurk: Wurk, r: Any) -> None:
    old, kept = spec(args=(1,)), spec(args=(2,))
    for s in (old, kept):
        register(r, s, T0)
    r.lpush(keys.history(old.lid), json.dumps([T0, "j"]))
    Ticker(wurk, [kept]).take_office(T0)
    assert r.smembers(keys.PERIODIC) == {kept.lid.encode()}
    assert not r.exists(keys.loop(old.lid), keys.history(old.lid))
    assert prune(r, [kept.lid]) == []


def test_the_ticker_fires_each_occurrence_once_on_the_clock_it_is_given(wurk: Wurk, r: Any) -> None:
    s = spec(args=("tick",), queue="low")
    ticker = Ticker(wurk, [s])
    ticker.take_office(T0)
    assert ticker.tick(T0 + 59) == []
    fired = ticker.tick(T0 + 60.5)
    assert [f.due for f in fired] == [T0 + 60]
    assert ticker.tick(T0 + 61) == []  # the same occurrence never twice
    assert r.hget(keys.loop(s.lid), "nf") == format_stamp(T0 + 120).encode()
    [job] = queued(r, "low")
    assert (
        job["class"] == "tests.jobsapp.jobs.echo" and job["args"] == ["tick"] and job["jid"] == fired[0].jid
    )
    loop = LoopSet(wurk).get(s.lid)
    assert loop is not None and loop.last_fire is not None
    assert loop.next_fire == datetime.fromtimestamp(T0 + 120, UTC)
    assert [f.jid for f in loop.history()] == [fired[0].jid]


def test_no_backfill_after_a_long_gap_and_a_late_fire_warns(
    wurk: Wurk, r: Any, caplog: pytest.LogCaptureFixture
) -> None:
    s = spec()
    ticker = Ticker(wurk, [s])
    ticker.take_office(T0)
    with caplog.at_level(logging.WARNING, "django_wurk.periodic"):
        fired = ticker.tick(T0 + 3600 + 30)  # an hour without a leader: 60 occurrences missed
    assert len(fired) == 1 and len(queued(r)) == 1
    assert "late" in caplog.text and "not made up" in caplog.text
    assert r.hget(keys.loop(s.lid), "nf") == format_stamp(T0 + 3660).encode()
    assert ticker.tick(T0 + 3600 + 45) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, "django_wurk.periodic"):
        assert len(ticker.tick(T0 + 3661)) == 1  # on time: no warning
    assert "late" not in caplog.text


def test_racing_tickers_push_each_occurrence_exactly_once(wurk: Wurk, r: Any) -> None:
    s = spec()
    Ticker(wurk, [s]).take_office(T0)
    tickers = [Ticker(wurk, [s]) for _ in range(4)]
    rounds = 40
    for n in range(1, rounds + 1):
        now = T0 + 60 * n + 1
        gate = threading.Barrier(len(tickers))
        results: list[int] = []

        def run(
            t: Ticker, at: float = now, barrier: threading.Barrier = gate, out: list[int] = results
        ) -> None:
            barrier.wait()
            out.append(len(t.tick(at)))

        threads = [threading.Thread(target=run, args=(t,)) for t in tickers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(results) == 1, f"round {n}: {results}"
    assert len(queued(r)) == rounds
    assert len(LoopSet(wurk).get(s.lid).history()) == 25  # type: ignore[union-attr]


def test_a_paused_loop_skips_its_occurrences_and_unpausing_never_fires_a_stale_one(
    wurk: Wurk, r: Any
) -> None:
    s = spec()
    ticker = Ticker(wurk, [s])
    ticker.take_office(T0)
    loop = LoopSet(wurk).get(s.lid)
    assert loop is not None and loop.pause() and loop.paused
    assert ticker.tick(T0 + 61) == [] and ticker.tick(T0 + 121) == []
    assert queued(r) == []
    assert r.hget(keys.loop(s.lid), "nf") == format_stamp(T0 + 180).encode()
    assert loop.unpause() and not LoopSet(wurk).get(s.lid).paused  # type: ignore[union-attr]
    assert ticker.tick(T0 + 150) == []
    assert len(ticker.tick(T0 + 181)) == 1


def test_enqueue_now_pushes_once_records_history_and_leaves_the_schedule(wurk: Wurk, r: Any) -> None:
    s = spec(args=(7,), queue="low")
    Ticker(wurk, [s]).take_office(T0)
    before = r.hmget(keys.loop(s.lid), "nf", "lf")
    [loop] = list(LoopSet(wurk))
    assert isinstance(loop, Loop) and loop.queue == "low" and loop.args == [7] and loop.job == s.klass
    jid = loop.enqueue_now()
    [job] = queued(r, "low")
    assert job["jid"] == jid and job["args"] == [7]
    assert r.hmget(keys.loop(s.lid), "nf", "lf") == before
    [entry] = loop.history()
    assert isinstance(entry, LoopFire) and entry.jid == jid


def test_history_keeps_the_last_25_newest_first(wurk: Wurk, r: Any) -> None:
    s = spec()
    ticker = Ticker(wurk, [s])
    ticker.take_office(T0)
    jids = [ticker.tick(T0 + 60 * n + 1)[0].jid for n in range(1, 31)]
    history = LoopSet(wurk).get(s.lid).history()  # type: ignore[union-attr]
    assert [h.jid for h in history] == list(reversed(jids))[:25]
    assert r.llen(keys.history(s.lid)) == 25


def test_pausing_a_loop_that_is_gone_writes_nothing(wurk: Wurk, r: Any) -> None:
    s = spec()
    Ticker(wurk, [s]).take_office(T0)
    loop = LoopSet(wurk).get(s.lid)
    Ticker(wurk, []).take_office(T0)
    assert loop is not None and not loop.pause() and not r.exists(keys.loop(s.lid))
    assert LoopSet(wurk).get(s.lid) is None and list(LoopSet(wurk)) == []


def test_current_leader(wurk: Wurk, r: Any) -> None:
    assert current_leader(wurk) is None
    r.set(keys.LEADER, "host:1:abc")
    assert current_leader(wurk) == "host:1:abc"


def dues_between(wurk: Wurk, expression: str, tz: str, start: datetime, end: datetime) -> list[datetime]:
    """What the ticker fires for a real cron loop, ticked every 10 minutes from ``start`` to ``end``."""
    from django_wurk.core.features.periodic.cron import Cron, parse_timezone

    s = LoopSpec(Cron.parse(expression), jobs.echo.job_class, tz=parse_timezone(tz))
    ticker = Ticker(wurk, [s])
    ticker.take_office(start.timestamp())
    dues, at = [], start
    while at <= end:
        dues += [datetime.fromtimestamp(f.due, UTC) for f in ticker.tick(at.timestamp())]
        at += timedelta(minutes=10)
    Ticker(wurk, []).take_office(end.timestamp())  # forget the loop: the next call starts afresh
    return dues


def test_daylight_saving_a_skipped_time_does_not_fire_and_a_repeated_one_fires_once(wurk: Wurk) -> None:
    # Europe/Berlin springs forward on 2026-03-29 (02:00 -> 03:00): 02:30 does not exist that day.
    spring = dues_between(
        wurk,
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 3, 28, 12, tzinfo=UTC),
        datetime(2026, 3, 30, 12, tzinfo=UTC),
    )
    assert spring == [datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]  # 02:30 CEST
    # It falls back on 2026-10-25 (03:00 -> 02:00): 02:30 happens twice and fires once.
    autumn = dues_between(
        wurk,
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 10, 24, 12, tzinfo=UTC),
        datetime(2026, 10, 26, 12, tzinfo=UTC),
    )
    assert [d.date().isoformat() for d in autumn] == ["2026-10-25", "2026-10-26"]
    assert autumn[1] == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # 02:30 CET
