"""Does drain throughput grow with shards? Two worker processes, on one shard or on two.

    python bench/shards.py                 # 3 rounds of 40,000 no-op jobs (make bench-shards)
    python bench/shards.py --jobs 10000 --rounds 1

Both layouts run the same two ``runwurk -P 1 -c 10`` processes on the same jobs; only where
the jobs and the processes' Redis are differs:

- **one shard**: all N jobs in one Redis, both processes on it (``--shard default``);
- **two shards**: N/2 jobs in each of two Redis servers, one process per shard
  (``--shard default`` and ``--shard bulk``, with ``WURK_SHARDS`` naming the second).

The jobs report their completions to a third, private Redis (``bench/jobside.py``), so the
probe costs both layouts the same. A round times each layout from the first job's start to
the last one's end; the median over the rounds is printed, with the ratio.

What the drain shows depends on where the bottleneck is: one Redis serves far more than two
Python processes can ask of it, so on a machine with few cores the workers' CPU, not Redis,
limits a drain, and the second shard buys little. So each drain also reads the busiest
shard's Redis CPU (``INFO cpu``) and prints the **Redis-bound ceiling**: jobs per CPU second
of that server, the rate at which it would saturate its one core if workers on other hosts
asked for more. That ceiling is what a shard adds. See docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import BenchError, RedisServer

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 10


def base_env(probe: str, default: str, shards: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
    env.update(
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="bench.settings",
        BENCH_REDIS_URL=probe,
        WURK_REDIS_URL=default,
        WURK_SHARDS=json.dumps(shards),
        PYTHONUNBUFFERED="1",
    )
    return env


def fill(probe: str, url: str, n: int) -> None:
    """Push n no-op jobs to the Redis at ``url`` with the bulk API (untimed)."""
    command = [
        sys.executable,
        "bench/client.py",
        "bench.benchapp.client",
        "enqueue",
        "noop",
        str(n),
        "--bulk",
    ]
    proc = subprocess.run(command, cwd=ROOT, env=base_env(probe, url, {}), capture_output=True, text=True)
    if proc.returncode:
        raise BenchError(f"filling {url} failed:\n{proc.stderr[-3000:]}")


def release(urls: list[str]) -> None:
    """Hand the filled queue to the waiting workers on every shard, back to back (RENAME wakes
    a blocked fetch), so no process starts early because its sibling was slower to boot."""
    for url in urls:
        redis.Redis.from_url(url).rename("queue:default", "queue:go")


def registered(urls: list[str]) -> int:
    return sum(int(redis.Redis.from_url(url).scard("processes")) for url in set(urls))


def redis_cpu(url: str) -> float:
    """CPU seconds the server at ``url`` has used so far (user + system)."""
    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def drain(
    probe: redis.Redis, probe_url: str, default: str, shards: dict[str, str], works: list[str], n: int
) -> tuple[float, float, float]:
    """Start one ``runwurk -P 1`` per entry of ``works`` (a shard name); once n jobs are done,
    the jobs/s, the busiest shard's Redis CPU as a share of one core over the drain, and the
    jobs per CPU second of that Redis (the rate at which it would saturate its core).

    The workers listen to queue ``go``, empty until every one of them is up; then each shard's
    filled ``default`` queue becomes ``go`` at once, and the clock is the jobs' own."""
    env = base_env(probe_url, default, shards)
    env["WURK_FETCH_TIMEOUT"] = "0.1"
    urls = [default if shard == "default" else shards[shard] for shard in works]
    logs = [tempfile.TemporaryFile() for _ in works]  # noqa: SIM115 (closed below)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django",
                "runwurk",
                "-P",
                "1",
                "-c",
                str(CONCURRENCY),
                "-q",
                "go",
                "-v",
                "0",
                "-t",
                "5",
                "--shard",
                shard,
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for shard, log in zip(works, logs, strict=True)
    ]
    try:
        boot = time.monotonic() + 60
        while registered(urls) < len(procs):
            if time.monotonic() > boot or any(proc.poll() is not None for proc in procs):
                raise BenchError("the workers did not all start within 60 s")
            time.sleep(0.05)
        used = sorted(set(urls))
        cpu_before = [redis_cpu(url) for url in used]
        released = time.monotonic()
        release(used)
        deadline = time.monotonic() + 60 + n / 200
        while int(probe.get("bench:done") or 0) < n:
            for proc, log in zip(procs, logs, strict=True):
                if proc.poll() is not None:
                    log.seek(0)
                    raise BenchError(f"a worker exited:\n{log.read().decode(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise BenchError(f"{probe.get('bench:done')}/{n} jobs done in time")
            time.sleep(0.05)  # the timing comes from the jobs' own timestamps, not this loop
        wall = time.monotonic() - released
        cpu = max(redis_cpu(url) - before for url, before in zip(used, cpu_before, strict=True))
        pids = probe.smembers("bench:pids")
        firsts = [float(v) for v in probe.mget([f"bench:first:{p.decode()}" for p in pids]) if v]
        lasts = [float(v) for v in probe.mget([f"bench:last:{p.decode()}" for p in pids]) if v]
        return n / (max(lasts) - min(firsts)), cpu / wall, n / cpu
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40_000, help="no-op jobs per drain (default 40000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the layouts (default 3)")
    opts = parser.parse_args()

    servers = [RedisServer() for _ in range(3)]
    for server in servers:
        server.start()
    probe_server, first, second = servers
    probe = redis.Redis.from_url(probe_server.url)
    shard_urls = {"bulk": second.url}
    results: dict[str, list[tuple[float, float, float]]] = {"1 shard": [], "2 shards": []}
    try:
        print(f"servers: {first.description}; {os.cpu_count()} CPUs; {opts.jobs} no-op jobs per drain")
        for round_ in range(1, opts.rounds + 1):
            for layout, works in (("1 shard", ["default", "default"]), ("2 shards", ["default", "bulk"])):
                for server in servers:
                    redis.Redis.from_url(server.url).flushall()
                if layout == "1 shard":
                    fill(probe_server.url, first.url, opts.jobs)
                else:
                    fill(probe_server.url, first.url, opts.jobs // 2)
                    fill(probe_server.url, second.url, opts.jobs - opts.jobs // 2)
                rate, busy, ceiling = drain(probe, probe_server.url, first.url, shard_urls, works, opts.jobs)
                results[layout].append((rate, busy, ceiling))
                print(
                    f"round {round_}, 2 processes on {layout}: {rate:,.0f} jobs/s, "
                    f"busiest Redis {busy:.0%} of a core",
                    flush=True,
                )
    finally:
        for server in servers:
            server.stop()
    # The ceiling: the rate at which the busiest shard's Redis would use a whole core, were
    # the workers not the limit first (its CPU grows with the jobs it serves).
    ceilings = {}
    for layout, runs in results.items():
        rate = statistics.median(r for r, _, _ in runs)
        busy = statistics.median(b for _, b, _ in runs)
        ceilings[layout] = statistics.median(c for _, _, c in runs)
        print(
            f"median, 2 processes on {layout}: {rate:,.0f} jobs/s; busiest Redis {busy:.0%} of a core; "
            f"Redis-bound ceiling ~{ceilings[layout]:,.0f} jobs/s"
        )
    one = statistics.median(r for r, _, _ in results["1 shard"])
    two = statistics.median(r for r, _, _ in results["2 shards"])
    print(f"drain ratio (2 shards / 1 shard): {two / one:.2f}x")
    print(f"ceiling ratio (2 shards / 1 shard): {ceilings['2 shards'] / ceilings['1 shard']:.2f}x")


if __name__ == "__main__":
    main()
