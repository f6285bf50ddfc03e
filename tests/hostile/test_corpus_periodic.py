"""The bad-data corpus against periodic jobs: junk in ``periodic``, ``loops:*``,
``loop-history:*`` and ``dear-leader``.

The leader's ticker, the campaign and the data API (``LoopSet``, ``Loop``) read those keys;
each must survive every value there: a junk next fire is rescheduled (never fired early,
never fired twice), a key of the wrong type is logged and skipped while the other loops
keep firing, a junk ``dear-leader`` never blocks the election for good, and reading never
raises.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from django_wurk import Wurk
from django_wurk.api import LoopSet, Process, current_leader
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.leader import Campaign
from django_wurk.core.features.periodic.loops import LoopSpec, format_stamp
from django_wurk.core.features.periodic.ticker import Ticker
from tests.conftest import wait_for
from tests.hostile.corpus import GoodJob

T0 = datetime(2020, 1, 1, tzinfo=UTC).timestamp()

#: Values a loop's ``nf`` may hold that name no usable time (or a time the schedule cannot make).
JUNK_NF: list[bytes] = [
    b"abc",
    b"",
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"1e400",
    b"-1",
    b"9" * 400,
    b"\xff\xfe",
    b"99999999999",  # year 5138
    b"4102444800",  # 2100: later than the next occurrence can be
    b'{"nf": 1}',
    b"1577836860\x00",
]
#: Other junk fields of a loop's hash (the ticker uses its own configuration for these).
JUNK_FIELDS: dict[str, list[bytes]] = {
    "paused": [b"maybe", b"\xff", b"", b"2" * 500],
    "options": [b"not json", b"[1,2]", b'{"args": 5}', b'{"queue": ["x"]}', b"\xff", b"[" * 5000],
    "lf": [b"nan", b"abc", b"-1e300"],
    "klass": [b"os.system", b"\xff", b"k" * 100_000],
    "schedule": [b"\xff", b"<script>alert(1)</script>"],
    "tz": [b"Mars/Olympus", b"\xff"],
}
JUNK_HISTORY: list[bytes] = [
    b"not json",
    b"5",
    b"[]",
    b"[1, 2, 3]",
    b'["when", "jid"]',
    b'[1e400, "j"]',
    b"[1577836800, 5]",
    b"\xff\xfe",
    b"[" * 5000,
    b'[1577836800, "ok-jid"]',
]


class EveryMinute:
    expression = "* * * * *"

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        return moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)


def spec(n: int) -> LoopSpec:
    return LoopSpec(EveryMinute(), GoodJob, args=(n,), queue="hostile-periodic")


def pushed(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange("queue:hostile-periodic", 0, -1)]


def read_everything(wurk: Wurk) -> None:
    """The data API over whatever is in Redis: every field and the history of every loop."""
    for loop in LoopSet(wurk):
        assert isinstance(loop.schedule, str) and isinstance(loop.klass, str) and isinstance(loop.tz, str)
        assert isinstance(loop.paused, bool) and isinstance(loop.args, list) and isinstance(loop.queue, str)
        for fire in loop.history():
            assert isinstance(fire.jid, str) and fire.fired_at.tzinfo is not None
    current_leader(wurk)


@pytest.mark.parametrize("nf", JUNK_NF, ids=lambda v: repr(v[:20]))
def test_a_junk_next_fire_is_rescheduled_never_fired(wurk: Wurk, r: Any, nf: bytes) -> None:
    s = spec(1)
    ticker = Ticker(wurk, [s])
    ticker.take_office(T0)
    r.hset(keys.loop(s.lid), "nf", nf)
    read_everything(wurk)
    assert ticker.tick(T0 + 30) == []
    assert pushed(r) == []
    assert r.hget(keys.loop(s.lid), "nf") == format_stamp(T0 + 60).encode()
    assert len(ticker.tick(T0 + 61)) == 1 and len(pushed(r)) == 1


def test_junk_fields_and_history_never_stop_the_ticker_or_the_data_api(wurk: Wurk, r: Any) -> None:
    specs = [spec(n) for n in range(6)]
    ticker = Ticker(wurk, specs)
    ticker.take_office(T0)
    for i, (name, values) in enumerate(JUNK_FIELDS.items()):
        for value in values:
            r.hset(keys.loop(specs[i].lid), name, value)
            read_everything(wurk)
    r.rpush(keys.history(specs[0].lid), *JUNK_HISTORY)
    history = LoopSet(wurk).get(specs[0].lid).history()  # type: ignore[union-attr]
    assert [h.jid for h in history] == ["ok-jid"]
    fired = ticker.tick(T0 + 61)
    # A junk "paused" is not a pause; every loop fired its one occurrence, once.
    assert sorted(f.lid for f in fired) == sorted(s.lid for s in specs)
    assert sorted(j["args"][0] for j in pushed(r)) == list(range(6))
    assert all(j["class"] == GoodJob.wire_name for j in pushed(r))  # never the hash's klass
    read_everything(wurk)


@pytest.mark.parametrize("kind", ["string", "list", "set", "zset"])
def test_a_loop_key_of_another_type_is_skipped_and_the_others_fire(
    wurk: Wurk, r: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad, good = spec(1), spec(2)
    ticker = Ticker(wurk, [bad, good])
    ticker.take_office(T0)
    r.delete(keys.loop(bad.lid), keys.history(bad.lid))
    writers = {
        "string": lambda k: r.set(k, "x"),
        "list": lambda k: r.rpush(k, "x"),
        "set": lambda k: r.sadd(k, "x"),
        "zset": lambda k: r.zadd(k, {"x": 1}),
    }
    writers[kind](keys.loop(bad.lid))
    writers[kind](keys.history(good.lid)) if kind != "list" else r.set(keys.history(good.lid), "x")
    with caplog.at_level(logging.ERROR, "django_wurk.periodic"):
        ticker.take_office(T0)
        fired = ticker.tick(T0 + 61)
        ticker.tick(T0 + 62)
    assert [f.lid for f in fired] == [good.lid]
    assert caplog.text.count("not a hash") == 1  # logged, not once per tick
    read_everything(wurk)
    assert LoopSet(wurk).get(bad.lid) is None and LoopSet(wurk).get(good.lid).history() == []  # type: ignore[union-attr]


def test_junk_members_of_the_periodic_set_are_pruned_and_never_shown(wurk: Wurk, r: Any) -> None:
    s = spec(1)
    r.sadd(keys.PERIODIC, b"\xff\xfe", b"../../x", b"x" * 10_000, b"0123456789abcdef", b"")
    r.set(b"loops:\xff\xfe", "x")
    read_everything(wurk)
    assert list(LoopSet(wurk)) == []
    Ticker(wurk, [s]).take_office(T0)
    assert r.smembers(keys.PERIODIC) == {s.lid.encode()}
    assert not r.exists(b"loops:\xff\xfe")


@pytest.mark.parametrize(
    "junk",
    [
        lambda r: r.set(keys.LEADER, "not a process, no ttl"),
        lambda r: r.set(keys.LEADER, b"\xff" * 100_000),
        lambda r: r.rpush(keys.LEADER, "a", "b"),
        lambda r: r.hset(keys.LEADER, "x", "y"),
    ],
    ids=["no-ttl", "huge-binary", "list", "hash"],
)
def test_a_junk_leader_key_never_blocks_the_election(wurk: Wurk, r: Any, junk: Any) -> None:
    junk(r)
    current_leader(wurk)  # reading it never raises, nor does the Busy page's leader badge
    process = Process("host:1:a", {}, 0, 0.0, False, 0, 0, 1, wurk)
    assert process.leader is False
    campaign = Campaign(wurk.scripts, "host:1:a", ttl=2)
    assert campaign.step() and current_leader(wurk) == "host:1:a"
    junk_while_leading = Campaign(wurk.scripts, "host:2:b", ttl=2)
    r.delete(keys.LEADER)
    r.rpush(keys.LEADER, "x")  # replaced under the leader by a key of another type
    assert not campaign.step() and not campaign.leading()  # its renewal sees it is not its lease
    campaign.resign()
    assert junk_while_leading.step() and current_leader(wurk) == "host:2:b"


def test_a_live_leader_with_a_ttl_is_respected(wurk: Wurk, r: Any) -> None:
    r.set(keys.LEADER, "other:1:x", ex=30)
    assert not Campaign(wurk.scripts, "host:1:a").step()
    assert current_leader(wurk) == "other:1:x"
    wait_for(lambda: r.ttl(keys.LEADER) > 0)
