"""Leader election and the periodic service, in process, with real threads and a real Redis.

A test schedule firing every second stands in for cron here, so the behaviour over time
(takeover, a quieted leader, an outage) shows in seconds; the real-process tests in
``test_periodic_processes.py`` run the same with cron minutes.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from django_wurk import Config, Wurk
from django_wurk.api import LoopSet, current_leader
from django_wurk.core.events import Process
from django_wurk.core.features.periodic import features, keys
from django_wurk.core.features.periodic.leader import Campaign
from django_wurk.core.features.periodic.loops import LoopSpec
from django_wurk.core.worker.launcher import Launcher
from django_wurk.core.worker.outage import Outage
from django_wurk.core.worker.routine import Routine
from tests.conftest import free_port, start_valkey, wait_for
from tests.jobsapp import jobs


class EverySecond:
    expression = "every second (test)"

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        return moment.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)


def every_second(*args: Any) -> LoopSpec:
    return LoopSpec(EverySecond(), jobs.echo.job_class, args=args, queue="ticks")


def fired(r: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange("queue:ticks", 0, -1)]


class Member:
    """One process's part in the fleet's election and its duties: what a launcher runs from
    its ``startup`` event, without the job threads."""

    def __init__(self, wurk: Wurk, identity: str) -> None:
        self.process = Process(wurk, identity, Outage(wurk.config.redis_url))

    @property
    def campaign(self) -> Campaign:
        campaign: Campaign = self.process.parts["leader"].campaign
        return campaign

    @property
    def thread(self) -> Any:
        return self.process.parts["leader"].thread

    def start(self) -> None:
        self.process.wurk.events.fire("startup", self.process)

    def stop(self) -> None:
        self.process.wurk.events.fire("shutdown", self.process)
        self.process.stop()


def service(wurk: Wurk, identity: str, specs: list[LoopSpec], ttl: float = 1.0) -> Member:
    """A fleet member of ``wurk`` firing ``specs`` when it leads (``wurk`` is given the features)."""
    wurk.use(*features(specs, ttl))
    return Member(wurk, identity)


def test_of_two_campaigners_one_leads_and_the_other_takes_over_when_it_stops_renewing(
    wurk: Wurk, r: Any
) -> None:
    a = Campaign(wurk.scripts, "host:1:a", ttl=0.5)
    b = Campaign(wurk.scripts, "host:2:b", ttl=0.5)
    assert a.step() and not b.step()
    assert a.leading() and not b.leading() and current_leader(wurk) == "host:1:a"
    assert r.pttl(keys.LEADER) > 0
    # a stops renewing (a kill -9): the key expires and b takes it at a later try.
    wait_for(b.step, timeout=5)
    assert current_leader(wurk) == "host:2:b" and b.leading()
    # a's own clock told it the lease ran out; its next renewal fails and it follows.
    assert not a.leading()
    assert not a.step() and not a.leading() and current_leader(wurk) == "host:2:b"


def test_a_follower_tries_again_when_the_holder_s_lease_ends_not_only_every_5_s(wurk: Wurk, r: Any) -> None:
    r.set(keys.LEADER, "other:1:x", px=300)
    follower = Campaign(wurk.scripts, "host:1:a", ttl=30, remaining=lambda: r.pttl(keys.LEADER) / 1000)
    assert not follower.step()
    started = time.monotonic()
    wait_for(follower.due, timeout=2)
    assert time.monotonic() - started < 1.0  # not FOLLOWER_RETRY (5 s) later
    assert follower.step() and current_leader(wurk) == "host:1:a"


def test_a_resigning_leader_gives_the_lead_back_and_only_its_own(wurk: Wurk, r: Any) -> None:
    a = Campaign(wurk.scripts, "host:1:a", ttl=30)
    b = Campaign(wurk.scripts, "host:2:b", ttl=30)
    assert a.step()
    b.resign()  # not leading: touches nothing
    assert current_leader(wurk) == "host:1:a"
    a.resign()
    assert current_leader(wurk) is None and not a.leading()
    assert b.step() and current_leader(wurk) == "host:2:b"


def test_three_services_fire_each_second_once_and_survive_the_leader_dying(wurk: Wurk, r: Any) -> None:
    specs = [every_second("x")]
    services = [service(wurk, f"host:{i}:n", specs) for i in range(3)]
    for s in services:
        s.start()
    try:
        leader = wait_for(lambda: current_leader(wurk), timeout=5)
        wait_for(lambda: len(fired(r)) >= 3, timeout=10)
        dead = next(s for s in services if s.campaign.identity == leader)
        Routine.stop(
            dead.process.parts["leader"]
        )  # its campaign ends without resigning: as kill -9 would leave it
        survivors = [s for s in services if s is not dead]
        wait_for(lambda: current_leader(wurk) not in (None, leader), timeout=10)
        count = len(fired(r))
        wait_for(lambda: len(fired(r)) >= count + 3, timeout=10)
    finally:
        for s in services:
            s.stop()
    assert current_leader(wurk) is None  # the survivor that led resigned at stop
    assert any(s.campaign.identity != leader for s in survivors)
    # Exactly once per occurrence: every second pushed at most one job, and the history agrees.
    seconds = Counter(int(h.fired_at.timestamp()) for h in LoopSet(wurk).get(specs[0].lid).history())  # type: ignore[union-attr]
    assert max(seconds.values()) == 1
    jids = [j["jid"] for j in fired(r)]
    assert len(jids) == len(set(jids))


def test_a_quieted_leader_keeps_firing_and_a_stopping_one_hands_over(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.use(*features([every_second("q")], ttl=1.0))
    launcher = Launcher(wurk)
    launcher.start()
    try:
        wait_for(lambda: current_leader(wurk) == launcher.identity, timeout=5)
        launcher.quiet()
        count = len(fired(r))
        wait_for(lambda: len(fired(r)) >= count + 2, timeout=10)
        # Still the leader: a one-second lease renewed late on a loaded machine may lapse for
        # a moment (then this process takes it again), so this reads it with a deadline.
        wait_for(lambda: current_leader(wurk) == launcher.identity, timeout=5)
    finally:
        launcher.stop()
    assert current_leader(wurk) is None


def test_the_election_takes_its_own_key_and_leaves_sidekiq_enterprise_s_alone(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    # A Ruby Enterprise leader holds dear-leader: our fleet elects its own leader beside it,
    # and never renews, deletes or takes Ruby's key.
    r.set("dear-leader", "ruby-host:7:abcdef", ex=60)
    wurk.use(*features([], ttl=1.0))
    launcher = Launcher(wurk)
    launcher.start()
    try:
        wait_for(lambda: current_leader(wurk) == launcher.identity, timeout=5)
        assert r.get("wurk-leader") == launcher.identity.encode()
        assert r.get("dear-leader") == b"ruby-host:7:abcdef"
    finally:
        launcher.stop()
    assert r.get("dear-leader") == b"ruby-host:7:abcdef" and not r.exists("wurk-leader")


def test_leader_key_dear_leader_joins_sidekiq_enterprise_s_election(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(test_config.replace(leader_key="dear-leader"))
    r.set("dear-leader", "ruby-host:7:abcdef", px=500)  # Ruby leads until its lease lapses
    wurk.use(*features([], ttl=1.0))
    launcher = Launcher(wurk)
    launcher.start()
    try:
        wait_for(lambda: current_leader(wurk) == launcher.identity, timeout=5)
        assert r.get("dear-leader") == launcher.identity.encode() and not r.exists("wurk-leader")
    finally:
        launcher.stop()


def test_using_the_features_again_replaces_them(wurk: Wurk) -> None:
    wurk.use(*features([]))
    wurk.use(*features([every_second()]))
    assert len(wurk.events.listeners("leader")) == 1  # one firing duty, the second one's
    assert [f.name for f in wurk.features].count("periodic") == 1
    with pytest.raises(ValueError, match="ttl"):
        features([], ttl=0)


def test_the_service_rides_out_redis_being_away_and_leads_once_it_is_back(
    wurk: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    away = Wurk()
    away.configure(Config(redis_url=f"redis://127.0.0.1:{port}/0", redis_socket_timeout=0.5))
    s = service(away, "host:9:z", [every_second("back")])
    caplog.set_level(logging.ERROR, logger="django_wurk.redis")
    s.start()
    server = None
    try:
        wait_for(lambda: "unreachable" in caplog.text, timeout=10)
        assert s.thread.is_alive()
        server = start_valkey(port=port)
        wait_for(lambda: current_leader(away) == "host:9:z", timeout=15)
        wait_for(lambda: away.redis.llen("queue:ticks") >= 1, timeout=10)
    finally:
        s.stop()
        away.reset()
        if server is not None:
            server.stop()
