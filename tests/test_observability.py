"""The health port of real ``runwurk`` processes: /metrics parsed by prometheus-client, /live, /ready."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from django_wurk import Wurk
from tests import test_runwurk
from tests.conftest import free_port, start_valkey, wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import identity_of, start

stop_later = test_runwurk.stop_later  # the fixture that kills subprocesses a test left running


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by name and labels, as prometheus-client's own parser reads it."""
    status, text = get(port, "/metrics")
    if status == 0:
        # No answer within get()'s timeout (a loaded machine, a supervisor busy forking): no
        # samples, so a wait_for polling this tries again. Any HTTP answer but 200 is a failure.
        return {}
    assert status == 200, text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def counts(port: int, name: str, job_class: str, queue: str) -> float:
    return sample(scrape(port), name, **{"class": job_class, "queue": queue})


def test_metrics_count_each_outcome_per_class_and_queue_and_the_probes_answer(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    proc = start(redis_url, "-c", "2", "-q", "critical", "-q", "default", "--health-port", str(port))
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    wait_for(lambda: get(port, "/ready")[0] == 200, timeout=30)
    assert get(port, "/live")[0] == 200
    assert get(port, "/nowhere")[0] == 404

    for n in range(3):
        jobs.echo.perform_async(n)
    jobs.echo.set(queue="critical").perform_async("urgent")
    jobs.always_fails.perform_async(1)  # retry=2: its first failure goes to the retry set
    jobs.dies_at_once.perform_async(1)  # retry=0: straight to the dead set
    jobs.fails_without_retry.perform_async(1)  # retry=False: neither retried nor dead
    # A queue nobody works, whose oldest job waited 100 s.
    r.sadd("queues", "parked")
    old = {"class": "Parked", "args": [], "jid": "p1", "queue": "parked", "enqueued_at": time.time() - 100}
    r.lpush("queue:parked", json.dumps(old))

    echo = "tests.jobsapp.jobs.echo"
    wait_for(lambda: counts(port, "wurk_jobs_processed_total", echo, "default") == 3, timeout=30)

    def every_job_counted() -> dict[Any, float] | None:
        # The jobs run on several threads in any order: wait until each one's outcome is in.
        s = scrape(port)
        done = [
            ("wurk_jobs_processed_total", "echo", "critical"),
            ("wurk_jobs_failed_total", "fails_without_retry", "default"),
            ("wurk_jobs_retried_total", "always_fails", "default"),
            ("wurk_jobs_dead_total", "dies_at_once", "default"),
        ]
        if all(sample(s, n, **{"class": f"tests.jobsapp.jobs.{j}", "queue": q}) for n, j, q in done):
            return s
        return None

    samples = wait_for(every_job_counted, timeout=30)

    def of(name: str, job: str, queue: str = "default") -> float:
        return sample(samples, name, **{"class": f"tests.jobsapp.jobs.{job}", "queue": queue})

    assert of("wurk_jobs_processed_total", "echo", "critical") == 1
    assert of("wurk_jobs_failed_total", "echo") == 0
    assert of("wurk_jobs_processed_total", "always_fails") == 1
    assert of("wurk_jobs_failed_total", "always_fails") == 1
    assert of("wurk_jobs_retried_total", "always_fails") == 1
    assert of("wurk_jobs_dead_total", "always_fails") == 0
    assert of("wurk_jobs_retried_total", "dies_at_once") == 0
    assert of("wurk_jobs_dead_total", "dies_at_once") == 1
    assert of("wurk_jobs_retried_total", "fails_without_retry") == 0
    assert of("wurk_jobs_dead_total", "fails_without_retry") == 0
    # The duration histogram: cumulative buckets ending in +Inf, which is the count.
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in samples.items()
        if name == "wurk_job_duration_seconds_bucket"
        and dict(labels)["class"] == "tests.jobsapp.jobs.echo"
        and dict(labels)["queue"] == "default"
    )
    assert buckets[-1] == (float("inf"), 3)
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert of("wurk_job_duration_seconds_count", "echo") == 3
    # Read from Redis at scrape time.
    assert sample(samples, "wurk_queue_size", queue="parked") == 1
    assert 99 < sample(samples, "wurk_queue_latency_seconds", queue="parked") < 200
    assert sample(samples, "wurk_queue_size", queue="default") == 0
    assert sample(samples, "wurk_retry_set_size") == 1 and sample(samples, "wurk_dead_set_size") == 1
    assert sample(samples, "wurk_redis_up") == 1 and sample(samples, "wurk_busy_threads") == 0

    # Busy threads while a job runs.
    jobs.sleepy.perform_async(2)
    wait_for(lambda: sample(scrape(port), "wurk_busy_threads") == 1, timeout=15)

    # Quiet (TSTP): not ready from the next heartbeat on, still live.
    proc.send_signal(signal.SIGTSTP)
    wait_for(lambda: r.hget(identity, "quiet") == b"true", timeout=15)
    status, body = get(port, "/ready")
    assert status == 503 and "quiet" in body
    assert get(port, "/live")[0] == 200
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert get(port, "/live")[0] == 0  # the port closed with the process


def test_ready_fails_while_redis_is_unreachable_and_live_does_not(
    stop_later: list[subprocess.Popen[str]],
) -> None:
    server = start_valkey()
    try:
        port = free_port()
        proc = start(f"{server.connection_url}/0", "-c", "1", "--health-port", str(port))
        stop_later.append(proc)
        wait_for(lambda: get(port, "/ready")[0] == 200, timeout=30)
        server.stop()
        server = None
        _, body = wait_for(lambda: (got := get(port, "/ready"))[0] == 503 and got, timeout=30)
        assert "Redis is unreachable" in body
        assert get(port, "/live")[0] == 200
        samples = wait_for(
            lambda: (s := scrape(port)) and sample(s, "wurk_redis_errors_total") > 0 and s, timeout=30
        )
        assert sample(samples, "wurk_redis_up") == 0  # /metrics still answers, and says so
    finally:
        if server is not None:
            server.stop()


def test_a_swarm_serves_the_sum_of_its_children(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    # Basic fetch: the job of the child killed below is lost rather than run again, so the
    # busy gauge's fall to 0 is the dead child's gauge leaving, not a gap between two runs.
    proc = start(redis_url, "-P", "2", "-c", "1", "-t", "2", "--health-port", str(port), WURK_FETCH="basic")
    stop_later.append(proc)
    try:
        swarm_checks(r, port, proc)
    finally:
        # Killing a supervisor leaves its children running (and taking later tests' jobs).
        children = child_pids(proc.pid)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def child_pids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def swarm_checks(r: Any, port: int, proc: subprocess.Popen[str]) -> None:
    wait_for(lambda: get(port, "/ready")[0] == 200, timeout=60)
    assert get(port, "/live")[0] == 200
    # One thread per child: two sleeping jobs run in both children at once.
    jobs.sleepy.perform_async(3)
    jobs.sleepy.perform_async(3)
    wait_for(lambda: sample(scrape(port), "wurk_busy_threads") == 2, timeout=30)
    sleepy = {"class": "tests.jobsapp.jobs.sleepy", "queue": "default"}
    wait_for(lambda: sample(scrape(port), "wurk_jobs_processed_total", **sleepy) == 2, timeout=30)
    for n in range(6):
        jobs.echo.perform_async(n)
    echo = {"class": "tests.jobsapp.jobs.echo", "queue": "default"}
    wait_for(lambda: sample(scrape(port), "wurk_jobs_processed_total", **echo) == 6, timeout=30)

    # A child killed mid-job: its counts stay, its busy thread does not, its successor is ready.
    sleeper = jobs.sleepy.perform_async(30)
    assert sleeper is not None
    wait_for(lambda: sample(scrape(port), "wurk_busy_threads") == 1, timeout=30)
    children = set(child_pids(proc.pid))

    def running_the_sleeper() -> int | None:
        # Only this swarm's children, and only the one whose work hash holds this very job: an
        # earlier test's process may still be listed, with work of its own, until its beat ages.
        for member in r.smembers("processes"):
            identity = member.decode()
            pid = int(identity.split(":")[1])
            if pid in children and any(sleeper.encode() in v for v in r.hvals(f"{identity}:work")):
                return pid
        return None

    busy_pid = wait_for(running_the_sleeper, timeout=15)  # written at the child's next pulse
    os.kill(busy_pid, signal.SIGKILL)
    wait_for(lambda: sample(scrape(port), "wurk_busy_threads") == 0, timeout=30)
    samples = scrape(port)
    assert sample(samples, "wurk_jobs_processed_total", **echo) == 6
    assert sample(samples, "wurk_jobs_processed_total", **sleepy) == 2
    wait_for(lambda: get(port, "/ready")[0] == 200, timeout=60)
    # TSTP reaches every child: the pod is no longer ready, the supervisor still live.
    proc.send_signal(signal.SIGTSTP)
    wait_for(lambda: get(port, "/ready")[0] == 503, timeout=30)
    assert "quiet" in get(port, "/ready")[1] and get(port, "/live")[0] == 200
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr


def test_a_bad_health_port_fails_at_start_up_naming_it(redis_url: str) -> None:
    proc = start(redis_url, WURK_HEALTH_PORT="70000")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "HEALTH_PORT" in stderr and "70000" in stderr


def test_json_logs_carry_each_jobs_jid_class_queue_duration_and_outcome(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Any, stop_later: list[subprocess.Popen[str]]
) -> None:
    logfile = tmp_path / "worker.log"
    proc = start(redis_url, "-c", "1", "--log-format", "json", "--logfile", str(logfile))
    stop_later.append(proc)
    identity_of(r, proc.pid)
    ok = jobs.echo.perform_async("x")
    bad = jobs.fails_without_retry.perform_async(1)

    def last_lines() -> dict[str, dict[str, Any]] | None:
        records = [json.loads(line) for line in logfile.read_text().splitlines() if line.startswith("{")]
        ends = {rec["ctx"]["jid"]: rec["ctx"] for rec in records if "outcome" in rec.get("ctx", {})}
        return ends if len(ends) == 2 else None

    ends = wait_for(last_lines, timeout=30)
    assert ends[ok]["outcome"] == "done" and ends[bad]["outcome"] == "fail"
    assert ends[ok]["job_class"] == "tests.jobsapp.jobs.echo" and ends[ok]["queue"] == "default"
    assert all(isinstance(e["duration"], float) and e["duration"] >= 0 for e in ends.values())
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    for line in logfile.read_text().splitlines():
        json.loads(line)  # every line, not only the job lines


def test_statsd_gets_sidekiq_pros_names_over_udp(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(0.2)
    proc = start(
        redis_url, "-c", "1", WURK_STATSD_HOST="127.0.0.1", WURK_STATSD_PORT=str(agent.getsockname()[1])
    )
    stop_later.append(proc)
    identity_of(r, proc.pid)
    jobs.echo.perform_async(1)
    jobs.always_fails.perform_async(1)
    lines: list[str] = []

    def received() -> bool:
        with contextlib.suppress(TimeoutError):
            lines.extend(agent.recv(65536).decode().splitlines())
        return (
            sum(line.startswith("sidekiq.jobs.count:") for line in lines) == 2
            and any(line.startswith("sidekiq.jobs.retried:") for line in lines)
            and any(line.startswith("sidekiq.processes:") for line in lines)  # the leader's gauges
        )

    try:
        wait_for(received, timeout=30)
    finally:
        agent.close()
    echo = "|#worker:tests.jobsapp.jobs.echo,queue:default"
    fails = "|#worker:tests.jobsapp.jobs.always_fails,queue:default"
    assert f"sidekiq.jobs.count:1|c{echo}" in lines and f"sidekiq.jobs.success:1|c{echo}" in lines
    assert f"sidekiq.jobs.failure:1|c{fails}" in lines and f"sidekiq.jobs.retried:1|c{fails}" in lines
    assert f"sidekiq.jobs.success:1|c{fails}" not in lines
    timing = next(line for line in lines if line.startswith("sidekiq.jobs.perform:") and line.endswith(echo))
    assert float(timing.split(":", 1)[1].split("|")[0]) >= 0 and "|ms|" in timing


def test_failures_before_the_middleware_are_counted_as_failed_and_dead(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    """An unknown class and an unreadable payload never reach the server middleware."""
    port = free_port()
    proc = start(redis_url, "-c", "1", "--health-port", str(port))
    stop_later.append(proc)
    identity_of(r, proc.pid)
    wait_for(lambda: get(port, "/ready")[0] == 200, timeout=30)
    unknown = {"class": "app.Gone", "args": [], "jid": "u1", "queue": "default", "retry": 0}
    retried = {"class": "app.Gone", "args": [], "jid": "u2", "queue": "default"}
    r.lpush("queue:default", json.dumps(unknown), json.dumps(retried), b"\xff{not json")

    def of(name: str, job_class: str) -> float:
        return sample(samples, name, **{"class": job_class, "queue": "default"})

    samples = wait_for(lambda: (s := scrape(port)) and sample(s, "wurk_dead_set_size") == 2 and s, timeout=30)
    samples = wait_for(
        lambda: (
            (s := scrape(port))
            and sample(s, "wurk_jobs_failed_total", **{"class": "app.Gone", "queue": "default"}) == 2
            and s
        ),
        timeout=30,
    )
    assert of("wurk_jobs_processed_total", "app.Gone") == 2
    assert of("wurk_jobs_retried_total", "app.Gone") == 1
    assert of("wurk_jobs_dead_total", "app.Gone") == 1
    invalid = "django_wurk.InvalidPayload"
    samples = wait_for(
        lambda: (
            (s := scrape(port))
            and sample(s, "wurk_jobs_dead_total", **{"class": invalid, "queue": "default"}) == 1
            and s
        ),
        timeout=30,
    )
    assert of("wurk_jobs_failed_total", invalid) == 1
    assert of("wurk_jobs_processed_total", invalid) == 1


def test_the_leader_sends_the_fleet_s_gauges_once_under_sidekiq_pro_names(wurk: Wurk, r: Any) -> None:
    from django_wurk.core.features.observability import statsd
    from django_wurk.core.features.periodic import leadership
    from tests.test_periodic_leader import Member

    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(0.2)
    client = statsd.Statsd("127.0.0.1", agent.getsockname()[1])
    wurk.use(statsd.feature(client, gauge_interval=0.2), leadership.feature(2.0))
    hostile = "evil|#queue:x,\nsidekiq.dead:99|g@1"
    r.sadd("queues", "default", hostile, b"\xffraw")
    old = {"class": "K", "args": [], "jid": "a", "queue": "default", "enqueued_at": time.time() - 50}
    r.lpush("queue:default", json.dumps(old), json.dumps(old))
    r.lpush(f"queue:{hostile}", json.dumps(old))
    r.zadd("retry", {"r1": 1})
    r.zadd("dead", {"d1": 1, "d2": 2})
    r.set("stat:processed", 41)
    r.set("stat:failed", 7)
    services = [Member(wurk, f"host:{i}:n") for i in range(2)]
    lines: list[str] = []
    sendings: list[float] = []  # when each "processed" gauge arrived

    def received() -> bool:
        with contextlib.suppress(TimeoutError):
            for line in agent.recv(65536).decode().splitlines():
                lines.append(line)
                if line.startswith("sidekiq.processed:"):
                    sendings.append(time.monotonic())
        return len(sendings) >= 4

    for s in services:
        s.start()
    try:
        wait_for(received, timeout=30)
    finally:
        for s in services:
            s.stop()
        agent.close()
    # One sending per interval, from the leader alone: two senders would arrive in pairs.
    assert all(b - a >= 0.1 for a, b in itertools.pairwise(sendings)), sendings
    assert sum(line == "sidekiq.processed:41|g" for line in lines) == len(sendings)
    for line in (
        "sidekiq.failures:7|g",
        "sidekiq.enqueued:3|g",
        "sidekiq.retries:1|g",
        "sidekiq.scheduled:0|g",
        "sidekiq.dead:2|g",
        "sidekiq.busy:0|g",
        "sidekiq.processes:0|g",
        "sidekiq.queue.size:2|g|#queue:default",
        "sidekiq.queue.size:0|g|#queue:\\xffraw",
        "sidekiq.queue.size:1|g|#queue:evil__queue:x__sidekiq.dead:99_g_1",
    ):
        assert line in lines, (line, lines[:20])
    latency = next(
        x for x in lines if x.startswith("sidekiq.queue.latency:") and x.endswith("#queue:default")
    )
    assert 49 <= float(latency.split(":", 1)[1].split("|")[0]) < 80
    # Every line is one well-formed DogStatsD gauge: the hostile name broke none of them.
    assert all(len(line.split("|")) in (2, 3) and line.split("|")[1] == "g" for line in lines)
    assert "sidekiq.dead:99|g" not in lines


def listening_on(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP ``port``, as the kernel lists them."""
    import ipaddress

    found = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(table, encoding="ascii") as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # LISTEN
                    raw = bytes.fromhex(address)
                    # Each 32-bit word is in the host's (little-endian) order.
                    packed = b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4))
                    found.add(str(ipaddress.ip_address(packed)))
    return found


def test_the_health_port_listens_where_health_bind_says(
    redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    """Every IPv4 interface by default (the kubelet probes, and Prometheus scrapes, the pod's
    IP); --health-bind (or HEALTH_BIND) narrows it, to loopback here, or serves IPv6."""
    for args, env, address, url_host in (
        ((), {}, "0.0.0.0", "127.0.0.1"),
        (("--health-bind", "127.0.0.1"), {"WURK_HEALTH_BIND": "0.0.0.0"}, "127.0.0.1", "127.0.0.1"),
        (("--health-bind", "::1"), {}, "::1", "[::1]"),
    ):
        port = free_port()
        proc = start(redis_url, "-c", "1", "--health-port", str(port), *args, **env)
        stop_later.append(proc)
        wait_for(lambda: listening_on(port), timeout=60)  # noqa: B023 - used before the next turn
        assert listening_on(port) == {address}
        with urllib.request.urlopen(f"http://{url_host}:{port}/live", timeout=10) as response:
            assert response.status == 200
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr


def test_a_bad_health_bind_fails_at_start_up_naming_it(redis_url: str) -> None:
    proc = start(redis_url, "--health-port", str(free_port()), "--health-bind", "every interface")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "--health-bind: WURK['HEALTH_BIND']: must be an IP address" in stderr and "Traceback" not in stderr


def test_a_health_port_in_use_stops_the_worker_naming_the_setting(redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start(redis_url, "--health-port", str(port), WURK_HEALTH_BIND="127.0.0.1")
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0 and f"HEALTH_PORT: cannot listen on 127.0.0.1:{port}" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HEALTH_PORT", -1),
        ("HEALTH_PORT", 65536),
        ("HEALTH_BIND", ""),
        ("HEALTH_BIND", "localhost:9191"),
        ("HEALTH_BIND", "every interface"),
        ("HEALTH_BIND", "10.0.0.300"),
        ("READY_WINDOW", 0),
        ("READY_WINDOW", float("nan")),
        ("STATSD_PORT", 0),
        ("STATSD_PREFIX", "a|b"),
        ("STATSD_PREFIX", ""),
    ],
)
def test_bad_observability_settings_are_refused_by_name(name: str, value: Any) -> None:
    from django_wurk.conf import Settings
    from django_wurk.core.config import ConfigError

    with pytest.raises(ConfigError, match=name):
        Settings.from_mapping({name: value})


def test_a_supervisor_resets_its_pool_only_between_probes(wurk: Wurk, r: Any, tmp_path: Any) -> None:
    """Before each fork the supervisor drops its pool's connections (``wurk.reset()``). A
    probe reading Redis at that moment lost its connection mid-read (CI saw a 500 when a
    child was replaced). Hold a scrape inside Redis (CLIENT PAUSE), reset as the supervisor
    does, and the scrape must still read Redis whole."""
    import threading

    from django_wurk.core.features.observability import supervisor
    from django_wurk.core.features.observability.options import HealthOptions

    r.sadd("queues", "default")
    r.lpush("queue:default", b"{}")
    port = free_port()
    redis_in_use = threading.Lock()
    server = supervisor.serve(wurk, HealthOptions(port, bind="127.0.0.1"), str(tmp_path), list, redis_in_use)
    try:
        assert sample(scrape(port), "wurk_redis_up") == 1
        answer: list[dict[Any, float]] = []
        r.execute_command("CLIENT", "PAUSE", 1500)  # every client's next command waits 1.5 s
        scraping = threading.Thread(target=lambda: answer.append(scrape(port)))
        scraping.start()
        wait_for(redis_in_use.locked, timeout=10)  # the scrape is in Redis, holding the lock
        with redis_in_use:  # what the supervisor's before_fork does
            wurk.reset()
        scraping.join(15)
        (samples,) = answer
        assert sample(samples, "wurk_redis_up") == 1
        assert sample(samples, "wurk_queue_size", queue="default") == 1
    finally:
        server.stop()
