"""A mixed fleet with today's Sidekiq: 7.3 and 8.0 (and 6.4.1 where a case concerns it) as
live peers of our workers on one Redis.

Each version runs as real processes shared by the module's tests (one ``sidekiq``, one Web UI
per version, started when its first test needs them). Here: what test_web_ui.py and
test_activejob.py check at length for 6.4.1, condensed (every Web UI page, GET, over our
processes and data; ActiveJob where the version allows), and what 7.x/8.0 brought: per-job
metrics in both layouts, the leader key, the unique digest, capsules and weights in the
process hash, iterable state (``it-<jid>``), and Sidekiq 8's millisecond timestamps beside our
float seconds. Both directions, failures and Sidekiq's data API run against every version in
the modules beside this one (``on_versions``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import ProcessSet, RetrySet, current_leader
from django_wurk.core import metrics, wire
from django_wurk.core.config import CapsuleSpec, QueueSpec
from django_wurk.core.features.iterable.state import IterationState, Saved
from django_wurk.core.features.periodic import features
from django_wurk.core.features.unique import digest
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import RUBY_DIR, VERSIONS, Peer, SidekiqProcess, on_versions, ruby_seen
from tests.interop.test_web_ui import Browser
from tests.jobsapp import activejob_jobs, jobs
from tests.jobsapp.interop_jobs import RubyEcho

ECHO = "tests.jobsapp.jobs.echo"
ALWAYS_FAILS = "tests.jobsapp.jobs.always_fails"
BLOCKS = "tests.jobsapp.jobs.blocks_until_released"
OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "fleet"
#: The capsule the Ruby process adds beside its default one (Sidekiq 7+), and ours.
RUBY_CAPSULE = "single:1:rb-single"
OUR_CAPSULES = (
    CapsuleSpec("default", (QueueSpec("default", 2), QueueSpec("critical", 1)), 2),
    CapsuleSpec("single", (QueueSpec("py-single"),), 1),
)


# The peers ------------------------------------------------------------------------------


#: Sidekiq 7.3 and 8.0: the cases the 6.4.1 modules beside this one check at length for 6.4.1.
NEWER = ("7.3", "8.0")
on = on_versions


@pytest.fixture(scope="module")
def sidekiq(peer: Peer, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidekiqProcess]:
    """One ``sidekiq`` of ``peer``'s version for the module: queues ``ruby`` and ``mailers``
    (never ``default``, which our workers take), polling every 0.2 s, beating every second, with a
    second capsule."""
    logfile = tmp_path_factory.mktemp(f"sidekiq-{peer.version}") / "sidekiq.log"
    process = SidekiqProcess(
        peer,
        redis_url,
        logfile,
        "ruby",
        "mailers",
        env={"SIDEKIQ_POLL": "0.2", "SIDEKIQ_BEAT": "1", "SIDEKIQ_CAPSULE": RUBY_CAPSULE},
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def web(peer: Peer, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``peer``'s own Web UI (``ruby/web.ru`` under WEBrick); its base URL."""
    logfile = tmp_path_factory.mktemp(f"web-{peer.version}") / "rackup.log"
    args = [
        *peer.rackup,
        "-s",
        "webrick",
        "-E",
        "development",
        "-o",
        "127.0.0.1",
        "-p",
        "0",
        str(RUBY_DIR / "web.ru"),
    ]
    with logfile.open("w") as log:
        proc = subprocess.Popen(args, env=peer.environ(redis_url), stdout=log, stderr=subprocess.STDOUT)

    def bound_port() -> int | None:
        if proc.poll() is not None:
            raise AssertionError(f"rackup exited early:\n{logfile.read_text()}")
        found = re.search(r"HTTPServer#start: pid=\d+ port=(\d+)", logfile.read_text())
        return int(found.group(1)) if found else None

    try:
        yield f"http://127.0.0.1:{wait_for(bound_port, timeout=60)}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def ours(wurk: Wurk, test_config: Any) -> Iterator[Callable[..., Launcher]]:
    """``ours(**config changes)``: our worker (queue ``default`` unless told), stopped afterwards."""
    started: list[Launcher] = []

    def start(**changes: Any) -> Launcher:
        changes.setdefault("queues", (QueueSpec("default"),))
        wurk.configure(test_config.replace(**changes))
        worker = Launcher(wurk)
        worker.start()
        started.append(worker)
        return worker

    yield start
    jobs.release.set()
    try:
        for worker in started:
            worker.stop()
    finally:
        jobs.release.clear()


def seen(r: Any, name: str) -> list[Any]:
    return [json.loads(x) for x in r.lrange(f"seen:{name}", 0, -1)]


def zjids(r: Any, key: str) -> dict[str, dict[str, Any]]:
    return {p["jid"]: p for p in (json.loads(m) for m in r.zrange(key, 0, -1))}


# The Web UI and ActiveJob ------------------------------------------------------------------
# (Both directions, failures and the data API run against every version in the modules beside
# this one: test_ruby_to_python.py, test_python_to_ruby.py, test_failures.py, test_processes.py.)


@on(*NEWER)
def test_every_web_ui_page_with_our_processes_and_data(
    peer: Peer, sidekiq: SidekiqProcess, web: str, r: Any, ours: Callable[..., Launcher],
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    worker = ours(capsules=OUR_CAPSULES, poll_interval=0.1)
    running = jobs.blocks_until_released.perform_async("busy-arg")
    retrying = jobs.always_fails.perform_async(7)
    dead = jobs.dies_at_once.perform_async(8)
    scheduled = jobs.echo.perform_in(3600, "later")
    waiting = jobs.echo.set(queue="parked").perform_async("waiting-arg")
    wait_for(lambda: retrying in zjids(r, "retry") and dead in zjids(r, "dead"), timeout=20)
    wait_for(lambda: r.hget(worker.identity, "busy") == b"1", timeout=10)
    wait_for(lambda: sidekiq.registered(r), timeout=20)
    browser = Browser(web, OUTPUT / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name))

    busy = browser.get("/busy").html
    assert worker.identity.split(":")[1] in busy and running in busy and BLOCKS in busy
    assert "py-single" in busy  # our second capsule's queue, as 7.x/8.0 list a process's queues
    for path, jid in (("/queues/parked", waiting), ("/retries", retrying), ("/scheduled", scheduled),
                      ("/morgue", dead)):  # fmt: skip
        assert jid in browser.get(path).html, f"{jid} not on {path}"
    for zset, prefix, jid in (("retry", "/retries/", retrying), ("schedule", "/scheduled/", scheduled),
                              ("dead", "/morgue/", dead)):  # fmt: skip
        [score] = [s for m, s in r.zrange(zset, 0, -1, withscores=True) if json.loads(m)["jid"] == jid]
        assert jid in browser.get(f"{prefix}{score!r}-{jid}").html
    for path in ("/", "/queues", "/metrics", f"/metrics/{ECHO}"):
        browser.get(path)  # 200, rendered: Browser.get asserts it
    stats = json.loads(browser.request("GET", "/stats").html)["sidekiq"]
    assert (stats["retries"], stats["dead"], stats["scheduled"]) == (1, 1, 1)


# Not on 8.0: its ActiveJob adapter needs ActiveJob 7.0+, and Debian 12 has 6.1 (so there is
# no case to run there, rather than one that would always skip; docs/interop.md says so).
@on("7.3")
def test_activejob_both_ways_where_the_version_allows(
    peer: Peer, activejob: None, sidekiq: SidekiqProcess, rb: Callable[..., Any], r: Any,
    ours: Callable[..., Launcher],
) -> None:  # fmt: skip
    ours(queues=(QueueSpec("aj-python"),))
    jid = activejob_jobs.hello.perform_async("from python", {"count": 2})  # queue mailers: Ruby runs it
    wait_for(lambda: ruby_seen(r), timeout=30)
    [ran] = ruby_seen(r)
    assert ran["class"] == "HelloJob" and ran["args"] == ["from python", {"count": 2}] and jid
    rb(op="activejob_rich", queue="aj-python")  # Rails' wrapper of this version, run by us
    wait_for(lambda: r.llen("seen:HelloJob"), timeout=20)
    assert json.loads(r.lindex("seen:HelloJob", 0)) == {
        "args": ["world", {"count": 2, "plain": [1, {"nested": True}]}],
        "kwargs": {"mode": "fast", "retries": 3},
    }


# What 7.x and 8.0 brought -----------------------------------------------------------------


@on(*NEWER)
def test_per_job_metrics_are_seen_by_both_sides(
    peer: Peer, sidekiq: SidekiqProcess, rb: Callable[..., Any], r: Any, ours: Callable[..., Launcher]
) -> None:
    wait_for(lambda: sidekiq.registered(r), timeout=20)  # so "auto" sees a 7.x process
    ours()  # METRICS_LAYOUT "auto"
    for n in range(3):
        jobs.echo.perform_async("metered", n)
    for n in range(2):
        RubyEcho.perform_async("metered", n)
    wait_for(lambda: len(seen(r, "echo")) == 3 and len(ruby_seen(r)) == 2, timeout=20)

    def counted() -> dict[str, int]:
        return {c.name: c.processed for c in metrics.overview(60).classes}

    # Sidekiq flushes at its beat (every 10 s); what it ran for an earlier test may come too.
    wait_for(lambda: {k: v for k, v in counted().items() if k in (ECHO, "Interop::Echo")}
             == {ECHO: 3, "Interop::Echo": 2}, timeout=30)  # fmt: skip
    theirs = rb(op="metrics", **{"class": ECHO})
    assert theirs["top"][ECHO]["p"] == 3 and theirs["top"]["Interop::Echo"]["p"] == 2
    assert theirs["hist"] == 3  # our executions in their histogram, in their layout
    assert metrics.job_class("Interop::Echo", 60).histogram_total == 2


@on(*VERSIONS)
def test_the_leader_key_is_ours_unless_shared_on_purpose(
    peer: Peer,
    sidekiq: SidekiqProcess,
    rb: Callable[..., Any],
    r: Any,
    wurk: Wurk,
    ours: Callable[..., Launcher],
) -> None:
    wurk.use(*features([], ttl=2.0))
    worker = ours()
    wait_for(lambda: current_leader(wurk) == worker.identity, timeout=10)
    assert rb(op="leader") in ("", None)  # Sidekiq's ProcessSet#leader: nobody holds dear-leader
    assert not r.exists("dear-leader")
    worker.stop()
    shared = ours(leader_key="dear-leader")
    wait_for(lambda: r.get("dear-leader") == shared.identity.encode(), timeout=10)
    assert rb(op="leader") == shared.identity  # the Busy page names it, as Enterprise's would


@on(*VERSIONS)
def test_the_unique_key_is_the_one_enterprise_computes(peer: Peer, rb: Callable[..., Any]) -> None:
    args = [1, "a/b", {"k": None}, 1.5, "é\u2028", 10**20, 1e20]
    theirs = rb(op="unique_digest", **{"class": "SyncAddress", "queue": "default", "args": args})
    payload = {"class": "SyncAddress", "queue": "default", "args": args}
    assert digest(payload) == theirs["enterprise8"]
    assert digest(payload, "enterprise7") == theirs["enterprise7"]


@on(*NEWER)
def test_capsules_and_weights_in_the_process_hash_both_ways(
    peer: Peer, sidekiq: SidekiqProcess, rb: Callable[..., Any], r: Any, ours: Callable[..., Launcher]
) -> None:
    worker = ours(capsules=OUR_CAPSULES)
    ruby_identity = wait_for(lambda: sidekiq.registered(r), timeout=20)
    wait_for(lambda: r.exists(worker.identity), timeout=10)
    seen_by_ruby = rb(op="process_capsules")
    mine = seen_by_ruby[worker.identity]
    assert mine["capsules"] == {
        "default": {"concurrency": 2, "mode": "weighted", "weights": {"default": 2, "critical": 1}},
        "single": {"concurrency": 1, "mode": "strict", "weights": {"py-single": 0}},
    }
    assert mine["weights"] == [{"default": 2, "critical": 1}, {"py-single": 0}]
    assert sorted(mine["queues"]) == ["critical", "default", "py-single"] and mine["concurrency"] == 3
    # Theirs as we read it: 7.3 writes one weights hash per capsule, 8.0 a "capsules" entry too.
    [theirs] = [p for p in ProcessSet() if p.identity == ruby_identity]
    assert {"rb-single": 0} in theirs.info["weights"] and len(theirs.info["weights"]) == 2
    if peer.major >= 8:
        assert set(theirs.info["capsules"]) == {"default", "single"}
        assert theirs.info["capsules"]["single"]["weights"] == {"rb-single": 0}
    assert "rb-single" in theirs.queues and theirs.concurrency == 3 + 1


@on(*NEWER)
def test_iterable_state_saved_here_resumes_in_ruby(
    peer: Peer, sidekiq: SidekiqProcess, wurk: Wurk, r: Any
) -> None:
    jid = wire.new_jid()
    IterationState(wurk.redis, jid).save(Saved(cursor=2, executions=1, runtime=0.5))
    wurk.redis.lpush(
        "queue:ruby",
        wire.dumps({"class": "Interop::Iterate", "queue": "ruby", "args": [["a", "b", "c", "d"]], "jid": jid,
                    "retry": True, "created_at": time.time(), "enqueued_at": time.time()}),
    )  # fmt: skip
    r.sadd("queues", "ruby")
    wait_for(lambda: len(ruby_seen(r)) == 2, timeout=20)
    assert [s["args"] for s in ruby_seen(r)] == [["c"], ["d"]]  # resumed at our cursor
    wait_for(lambda: not r.exists(f"it-{jid}"), timeout=10)  # done: Ruby cleared our state


class Watched(jobs.Hooked):
    """``Hooked`` saving (and so reading the cancel) every 50 ms."""

    checkpoint_interval = 0.05


def hooked_events(r: Any) -> list[Any]:
    return [json.loads(x) for x in r.lrange("seen:hooked", 0, -1)]


@on(*NEWER)
def test_sidekiqs_cancel_stops_our_iterable_job_and_ours_stops_theirs(
    peer: Peer,
    sidekiq: SidekiqProcess,
    rb: Callable[..., Any],
    wurk: Wurk,
    r: Any,
    ours: Callable[..., Launcher],
) -> None:
    ours()
    jid = Watched.perform_async(500, 0.02)
    assert jid is not None
    wait_for(lambda: sum(isinstance(e, int) for e in hooked_events(r)) >= 3, timeout=20)
    before = int(time.time())
    assert before - 1 <= rb(op="cancel_iteration", jid=jid) <= time.time()  # Client#cancel!
    wait_for(lambda: "complete" in hooked_events(r), timeout=20)
    assert hooked_events(r)[-3:] == ["cancel", "stop", "complete"]
    assert sum(isinstance(e, int) for e in hooked_events(r)) < 500
    wait_for(lambda: not r.exists(f"it-{jid}"), timeout=10)
    assert r.zcard("retry") == 0 and r.llen("queue:default") == 0
    # Ours stops theirs: cancelled before it runs, the Ruby job does no item and clears the state.
    # (Ruby's own cancel! of a job not yet started leaves no "c", and 7.3/8.0 then fail the job
    # parsing the missing cursor: ours writes the first run's "null" beside the flag.)
    theirs = wire.new_jid()
    assert IterationState(wurk.redis, theirs).cancel() >= before
    assert set(r.hgetall(f"it-{theirs}")) == {b"c", b"cancelled"} and r.hget(f"it-{theirs}", "c") == b"null"
    wurk.redis.lpush(
        "queue:ruby",
        wire.dumps({"class": "Interop::Iterate", "queue": "ruby", "args": [["a", "b"]], "jid": theirs,
                    "retry": True, "created_at": time.time(), "enqueued_at": time.time()}),
    )  # fmt: skip
    r.sadd("queues", "ruby")
    wait_for(lambda: not r.exists(f"it-{theirs}") and r.llen("queue:ruby") == 0, timeout=20)
    assert ruby_seen(r) == [] and r.zcard("retry") == 0


@on(*NEWER)
def test_sidekiq_8_milliseconds_and_our_float_seconds_in_one_fleet(
    peer: Peer, sidekiq: SidekiqProcess, rb: Callable[..., Any], r: Any, ours: Callable[..., Launcher]
) -> None:
    ours(queues=(QueueSpec("default"), QueueSpec("critical")), poll_interval=0.1)
    before = time.time()
    # Theirs: Sidekiq 8 writes integer milliseconds (7.3 float seconds); our worker fails the job
    # and writes failed_at as float seconds beside them.
    theirs = rb(op="push", item={"class": ALWAYS_FAILS, "queue": "critical", "args": [1], "retry": 2})
    wait_for(lambda: theirs in zjids(r, "retry"), timeout=20)
    entry = zjids(r, "retry")[theirs]
    assert isinstance(entry["created_at"], int if peer.major >= 8 else float)
    assert isinstance(entry["failed_at"], float)
    [ours_read] = [e for e in RetrySet() if e.jid == theirs]
    assert ours_read.created_at is not None and before - 1 <= ours_read.created_at <= time.time()
    read_back = rb(op="api_times", where="retry", jid=theirs)
    assert before - 1 <= read_back["created_at"] <= time.time()
    assert before - 1 <= read_back["failed_at"] <= time.time()
    # Ours: float seconds, run and failed by Ruby, which writes its own failed_at.
    mine = jobs.echo.set(queue="ruby").perform_async("never runs here")
    assert mine is not None
    r.delete("queue:ruby")
    pushed = RubyEcho.set(retry=1).perform_async("float")  # runs fine in Ruby: read its times first
    assert pushed is not None
    failed = rb(op="push", item={"class": "Interop::Fail", "queue": "ruby", "args": [2], "retry": 1})
    wait_for(lambda: failed in zjids(r, "retry"), timeout=20)
    ruby_entry = zjids(r, "retry")[failed]
    assert isinstance(ruby_entry["failed_at"], int if peer.major >= 8 else float)
    [read] = [e for e in RetrySet() if e.jid == failed]
    assert read.failed_at is not None and before - 1 <= read.failed_at <= time.time()


# Without ../shared ------------------------------------------------------------------------


def run_without_peers(require: bool) -> subprocess.CompletedProcess[str]:
    """This file's unique-digest check in a pytest of its own, with the peers' folder absent."""
    env = {k: v for k, v in os.environ.items() if k != "WURK_REQUIRE_PEERS"}
    env["WURK_SIDEKIQ_PEERS"] = "/nonexistent/shared/peers/ruby-sidekiq"
    if require:
        env["WURK_REQUIRE_PEERS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsE", "-p", "no:cacheprovider", "-n", "0", __file__,
         "-k", "test_the_unique_key_is_the_one_enterprise_computes"],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_without_shared_7_3_and_8_0_are_skipped_with_the_reason_or_fail_in_ci(ruby: None) -> None:
    laptop = run_without_peers(require=False)
    summary = laptop.stdout.strip().splitlines()[-1]
    assert laptop.returncode == 0 and "1 passed, 2 skipped" in summary, laptop.stdout  # 6.4.1 still runs
    assert (
        "SKIPPED [2]" in laptop.stdout and "which is absent (a checkout without ../shared)" in laptop.stdout
    )

    ci = run_without_peers(require=True)
    summary = ci.stdout.strip().splitlines()[-1]
    assert ci.returncode != 0 and "1 passed" in summary and "2 errors" in summary, ci.stdout
    assert "WURK_REQUIRE_PEERS=1 but Sidekiq 7.3 and 8.0 live in" in ci.stdout, ci.stdout
