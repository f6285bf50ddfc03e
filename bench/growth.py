"""How a worker's costs grow with the work around it: curves, not single points.

    python bench/growth.py              # 5 rounds of every curve (make bench-growth), ~5 minutes
    python bench/growth.py --rounds 1   # one round, under a minute
    python bench/growth.py --curves depth,queues

One ``runwurk -P 1 -c 10 -v 0`` process drains no-op jobs from a private Redis while one
thing grows, curve by curve:

- **depth**: 10k, 100k and 1M jobs waiting in the queue;
- **payload**: one string argument of 100 B, 10 KB and 100 KB;
- **queues**: 1, 10 and 50 queues with weights (``-q q0,1 -q q1,2 -q q2,3 ...``), the jobs
  spread evenly over them; 50 queues of which only one holds jobs (every fetch passes the
  49 empty ones); and the 50 with ten times the weights (the same shares: only the cost of
  drawing the order could differ);
- **processes**: 1, 10 and 100 live processes' heartbeats in Redis (ours plus 9 or 99
  others written in the shape our heartbeat and Sidekiq's write, refreshed every 5 s).

Queues are filled with pipelined LPUSH of valid payloads (the shape ``perform_async``
writes), never one by one. Each row times a fixed window of jobs (for example the 1,000th
to the 9,000th done), so the 1M case costs no more time than the 10k one, and the worker's
boot is outside the window. For each row it prints the median over the rounds of:

- jobs/s over the window, from the completion counter the jobs feed (bench/jobside.py);
- the worker's peak RSS during the window;
- the worker's CPU time per job (user + system, /proc/<pid>/stat) and the Redis server's
  (``INFO cpu``) per job: unlike jobs/s these barely move when other work shares the
  machine, and they say on which side of the socket a cost grows;
- the ratio of jobs/s and of RSS to the curve's smallest size.

The processes curve also measures a heartbeat directly, in this process: the time and the
Redis commands of one ``Heartbeat.beat()`` and of the poller's once-a-minute cleanup of the
``processes`` set, with 1, 10 and 100 processes present. Method and results:
docs/benchmarks.md, "Cost as work grows".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import IO

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import BenchError, RedisServer, rss_mb  # noqa: E402

CONCURRENCY = 10
#: LPUSH arguments per command and bytes per pipeline while filling.
PUSH_CHUNK = 1_000
PIPELINE_BYTES = 8 << 20
#: Seconds between two refreshes of the other processes' heartbeats (Sidekiq beats every 10).
FAKE_BEAT_EVERY = 5.0
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Row:
    """One point of a curve: what is filled, how the worker is started, which jobs are timed."""

    curve: str
    size: str
    queues: tuple[tuple[str, int], ...]  # (name, weight) as given to the worker
    filled: tuple[str, ...]  # the queues the jobs are spread over
    jobs: int
    arg_bytes: int = 100
    window: tuple[int, int] = (5_000, 45_000)
    processes: int = 1  # live processes in Redis, ours included


def weighted(n: int) -> tuple[tuple[str, int], ...]:
    """n queues with weights 1, 2, 3, 1, 2, 3, ...: a weighted worker, as ``-q name,weight``."""
    return tuple((f"q{i}", i % 3 + 1) for i in range(n))


def rows() -> list[Row]:
    """Every row times at least 20,000 jobs (5,000 at 100 KB) after the first few thousand:
    at tens of thousands of jobs a second a shorter window is mostly the clock's resolution.
    A depth row fills its depth on top of the window, so that many jobs wait throughout it."""
    default = (("default", 0),)
    q50 = weighted(50)
    heavy = tuple((name, weight * 10) for name, weight in q50)  # the same shares, larger weights
    window = (5_000, 45_000)
    return [
        *(
            Row("depth", label, default, ("default",), n + window[1], window=window)
            for label, n in (("10k", 10_000), ("100k", 100_000), ("1M", 1_000_000))
        ),
        Row("payload", "100 B", default, ("default",), 45_000, arg_bytes=100, window=window),
        Row("payload", "10 KB", default, ("default",), 22_000, arg_bytes=10_000, window=(2_000, 22_000)),
        Row("payload", "100 KB", default, ("default",), 6_000, arg_bytes=100_000, window=(1_000, 6_000)),
        *(
            Row("queues", str(n), weighted(n), tuple(q for q, _ in weighted(n)), 60_000, window=window)
            for n in (1, 10, 50)
        ),
        Row("queues", "50, 1 with jobs", q50, (q50[-1][0],), 45_000, window=window),
        Row("queues", "50, weights x10", heavy, tuple(q for q, _ in heavy), 60_000, window=window),
        *(
            Row("processes", str(n), default, ("default",), 45_000, processes=n, window=window)
            for n in (1, 10, 100)
        ),
    ]


# Filling ----------------------------------------------------------------------------------


def payloads(queue: str, n: int, arg_bytes: int, seed: int) -> Iterator[bytes]:
    """n valid NoopJob payloads for ``queue``, each with its own jid, made from one template."""
    now = time.time()
    args = json.dumps(["x" * arg_bytes])
    head = f'{{"retry":true,"queue":"{queue}","class":"NoopJob","args":{args},"jid":"'
    tail = f'","created_at":{now!r},"enqueued_at":{now!r}}}'.encode()
    prefix = head.encode()
    # Random jids, as the client makes them: a counter's leading zeros would be a run of 19
    # digits, which sends every payload to the slow JSON reader (wire.decode_json).
    random = Random(seed)
    for _ in range(n):
        yield prefix + b"%024x" % random.getrandbits(96) + tail


def check_payload(raw: bytes) -> None:
    """The engine reads what we fill (the worker would bury it otherwise, and the row would lie)."""
    from django_wurk.core import wire

    payload = wire.loads(raw)
    if payload.get("class") != "NoopJob":
        raise BenchError(f"unexpected payload {raw[:200]!r}")


def fill(r: redis.Redis, queues: tuple[str, ...], n: int, arg_bytes: int) -> None:
    """Spread n jobs evenly over ``queues``: chunked LPUSH, pipelined by the megabyte."""
    pipe = r.pipeline(transaction=False)
    pipe.sadd("queues", *queues)
    pending = 0
    share, extra = divmod(n, len(queues))
    jid = 0
    for index, queue in enumerate(queues):
        count = share + (index < extra)
        chunk: list[bytes] = []
        for raw in payloads(queue, count, arg_bytes, jid):
            if jid == 0:
                check_payload(raw)
            jid += 1
            chunk.append(raw)
            pending += len(raw)
            if len(chunk) == PUSH_CHUNK:
                pipe.lpush(f"queue:{queue}", *chunk)
                chunk = []
            if pending >= PIPELINE_BYTES:
                pipe.execute()
                pending = 0
        if chunk:
            pipe.lpush(f"queue:{queue}", *chunk)
    pipe.execute()


# Other processes' heartbeats ---------------------------------------------------------------


class OtherProcesses:
    """``count`` live processes besides the worker, each with 10 busy jobs, kept fresh.

    Written as our heartbeat writes them (the ``processes`` set, the process hash with a
    60 s TTL, the busy-work hash), so everything that reads processes sees them as alive.
    """

    def __init__(self, r: redis.Redis, count: int) -> None:
        self.r = r
        self.identities = [f"bench-host-{i}:{10_000 + i}:{i:012x}" for i in range(count)]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="bench-other-beats", daemon=True)
        job = next(payloads("default", 1, 100, 1 << 60)).decode()
        self.work = {
            f"tid{t}": json.dumps({"queue": "default", "payload": job, "run_at": int(time.time())})
            for t in range(CONCURRENCY)
        }

    def beat(self) -> None:
        pipe = self.r.pipeline(transaction=False)
        for identity in self.identities:
            info = {
                "hostname": identity.split(":")[0],
                "started_at": time.time(),
                "pid": int(identity.split(":")[1]),
                "tag": "",
                "concurrency": CONCURRENCY,
                "queues": ["default"],
                "weights": [{"default": 0}],
                "labels": [],
                "identity": identity,
                "version": "bench",
                "embedded": False,
            }
            pipe.sadd("processes", identity)
            pipe.hset(
                identity,
                mapping={
                    "info": json.dumps(info),
                    "concurrency": CONCURRENCY,
                    "busy": CONCURRENCY,
                    "beat": repr(time.time()),
                    "rtt_us": 100,
                    "quiet": "false",
                    "rss": 60_000,
                },
            )
            pipe.expire(identity, 60)
            pipe.unlink(f"{identity}:work")
            pipe.hset(f"{identity}:work", mapping=self.work)
            pipe.expire(f"{identity}:work", 60)
        pipe.execute()

    def __enter__(self) -> OtherProcesses:
        if self.identities:
            self.beat()
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def _run(self) -> None:
        while not self.stopping.wait(FAKE_BEAT_EVERY):
            self.beat()


# The worker -------------------------------------------------------------------------------


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        """TERM (its own clean shutdown), then KILL whatever is left of its process group."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


def start_worker(url: str, queues: tuple[tuple[str, int], ...]) -> Worker:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
    env.update(
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="bench.settings",
        BENCH_REDIS_URL=url,
        WURK_REDIS_URL=url,
        PYTHONUNBUFFERED="1",
    )
    queue_args: list[str] = []
    for name, weight in queues:
        queue_args += ["-q", f"{name},{weight}" if weight else name]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (Worker.stop closes it)
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "runwurk", "-P", "1", "-c", str(CONCURRENCY),
         *queue_args, "-v", "0", "-t", "5"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return Worker(process, log)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads, so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@dataclass
class Sample:
    rate: float
    rss_mb: float
    worker_us: float  # worker CPU per job
    redis_us: float  # Redis CPU per job


@dataclass
class Growth:
    server: RedisServer
    r: redis.Redis = field(init=False)

    def __post_init__(self) -> None:
        self.r = redis.Redis.from_url(self.server.url)

    def run(self, row: Row) -> Sample:
        self.r.flushall()
        fill(self.r, row.filled, row.jobs, row.arg_bytes)
        with OtherProcesses(self.r, row.processes - 1):
            worker = start_worker(self.server.url, row.queues)
            try:
                return self.measure(worker, *row.window)
            finally:
                worker.stop()

    def measure(self, worker: Worker, start: int, stop: int) -> Sample:
        """Time the jobs from the ``start``-th done to the ``stop``-th, sampling RSS meanwhile."""
        deadline = time.monotonic() + 120 + stop / 200

        def done() -> int:
            if worker.process.poll() is not None:
                raise BenchError(f"the worker exited:\n{worker.output()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.r.get('bench:done')} jobs done by the deadline\n{worker.output()}")
            return int(self.r.get("bench:done") or 0)

        while (first := done()) < start:
            time.sleep(0.005)
        t0 = time.monotonic()
        pid = int(next(iter(self.r.smembers("bench:pids"))))
        cpu0, redis0 = cpu_seconds(pid), redis_cpu(self.r)
        peak = rss_mb(pid)
        polls = 0
        while (last := done()) < stop:
            polls += 1
            if polls % 20 == 0:
                peak = max(peak, rss_mb(pid))
            time.sleep(0.005)
        t1 = time.monotonic()
        cpu1, redis1 = cpu_seconds(pid), redis_cpu(self.r)
        peak = max(peak, rss_mb(pid))
        jobs = last - first
        return Sample(jobs / (t1 - t0), peak, (cpu1 - cpu0) / jobs * 1e6, (redis1 - redis0) / jobs * 1e6)


# One heartbeat, measured in this process ---------------------------------------------------


@dataclass
class BeatCost:
    beat_us: float
    beat_commands: float
    cleanup_us: float
    cleanup_commands: float


def beat_cost(url: str, processes: int, beats: int = 200, cleanups: int = 50) -> BeatCost:
    """One worker's heartbeat (10 jobs busy, one job class's metrics to flush) and the poller's
    cleanup of the ``processes`` set, with ``processes`` live processes in Redis (ours included)."""
    from django_wurk.core.config import Config
    from django_wurk.core.engine import Wurk
    from django_wurk.core.worker.fetch import UnitOfWork
    from django_wurk.core.worker.heartbeat import Heartbeat
    from django_wurk.core.worker.outage import Outage
    from django_wurk.core.worker.scheduler import Poller
    from django_wurk.core.worker.stats import Stats
    from django_wurk.core.worker.work import WorkSet

    r = redis.Redis.from_url(url)
    r.flushall()
    wurk = Wurk()
    wurk.configure(Config(redis_url=url, concurrency=CONCURRENCY))
    outage = Outage(url)
    work = WorkSet()
    job = next(payloads("default", 1, 100, 1 << 61))
    for t in range(CONCURRENCY):
        work.start(f"tid{t}", UnitOfWork("default", job), threading.current_thread())
    stats = Stats()
    heartbeat = Heartbeat(wurk, "bench-self:1:000000000000", work, stats, outage, lambda _: None)
    poller = Poller(wurk, outage)

    def timed(n: int, before: Callable[[], None], call: Callable[[], None]) -> tuple[float, float]:
        spent = 0.0
        calls0 = commands(r)
        for _ in range(n):
            before()
            started = time.perf_counter()
            call()
            spent += time.perf_counter() - started
        return spent / n * 1e6, (commands(r) - calls0) / n

    def some_jobs() -> None:
        for _ in range(100):
            stats.record("NoopJob", 0.1, False, time.time())

    try:
        with OtherProcesses(r, processes - 1):
            heartbeat.beat()
            beat_us, beat_commands = timed(beats, some_jobs, heartbeat.beat)
            cleanup_us, cleanup_commands = timed(
                cleanups, lambda: r.delete("process_cleanup"), poller.cleanup_processes
            )
    finally:
        wurk.reset()
    # The timed loops' own DELs and the INFO reads are not the worker's.
    return BeatCost(beat_us, beat_commands - 1 / beats, cleanup_us, cleanup_commands - 2)


def commands(r: redis.Redis) -> int:
    return sum(int(v.get("calls", 0)) for v in r.info("commandstats").values())


# The report -------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def table(results: dict[Row, list[Sample]]) -> str:
    lines = [
        "| curve | size | jobs/s | x smallest | RSS MB | x smallest | worker CPU µs/job | Redis CPU µs/job |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    base: dict[str, tuple[float, float]] = {}
    for row, samples in results.items():
        rate = statistics.median(s.rate for s in samples)
        rss = statistics.median(s.rss_mb for s in samples)
        worker = statistics.median(s.worker_us for s in samples)
        server = statistics.median(s.redis_us for s in samples)
        base.setdefault(row.curve, (rate, rss))
        lines.append(
            f"| {row.curve} | {row.size} | {rate:,.0f} | {rate / base[row.curve][0]:.2f} | {rss:.1f} "
            f"| {rss / base[row.curve][1]:.2f} | {worker:.0f} | {server:.1f} |"
        )
    return "\n".join(lines)


def beat_table(costs: dict[int, list[BeatCost]]) -> str:
    lines = [
        "| live processes | one beat, µs | commands/beat | cleanup of `processes`, µs | commands/cleanup |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, runs in costs.items():
        lines.append(
            f"| {n} | {statistics.median(c.beat_us for c in runs):,.0f} "
            f"| {statistics.median(c.beat_commands for c in runs):.0f} "
            f"| {statistics.median(c.cleanup_us for c in runs):,.0f} "
            f"| {statistics.median(c.cleanup_commands for c in runs):.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    curves = sorted({row.curve for row in rows()})
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds over every row (default 5)")
    parser.add_argument("--curves", help=f"comma-separated, of {', '.join(curves)} (default: all)")
    opts = parser.parse_args()
    wanted = set(opts.curves.split(",")) if opts.curves else set(curves)
    if wanted - set(curves):
        parser.error(f"unknown curves: {', '.join(sorted(wanted - set(curves)))}")
    plan = [row for row in rows() if row.curve in wanted]

    server = RedisServer()
    server.start()
    started = time.monotonic()
    load_before = open("/proc/loadavg").read().split()[:3]  # noqa: SIM115
    results: dict[Row, list[Sample]] = {row: [] for row in plan}
    beats: dict[int, list[BeatCost]] = {n: [] for n in (1, 10, 100)} if "processes" in wanted else {}
    try:
        growth = Growth(server)
        log(f"server: {server.description}; {os.cpu_count()} CPUs; load average {' '.join(load_before)}")
        for round_ in range(1, opts.rounds + 1):
            for row in plan:
                sample = growth.run(row)
                results[row].append(sample)
                log(
                    f"round {round_}, {row.curve} {row.size}: {sample.rate:,.0f} jobs/s, "
                    f"RSS {sample.rss_mb:.1f} MB, worker {sample.worker_us:.0f} µs/job, "
                    f"Redis {sample.redis_us:.1f} µs/job"
                )
            for n in beats:
                cost = beat_cost(server.url, n)
                beats[n].append(cost)
                log(
                    f"round {round_}, heartbeat with {n} processes: {cost.beat_us:,.0f} µs and "
                    f"{cost.beat_commands:.0f} commands a beat; cleanup {cost.cleanup_us:,.0f} µs"
                )
    finally:
        server.stop()
    load_after = open("/proc/loadavg").read().split()[:3]  # noqa: SIM115
    print(f"\n{server.description}; runwurk -P 1 -c {CONCURRENCY} -v 0; medians of {opts.rounds} round(s)")
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}\n")
    print(table(results))
    if beats:
        print()
        print(beat_table(beats))
    print(f"\n(took {(time.monotonic() - started) / 60:.1f} min)")


if __name__ == "__main__":
    main()
