"""Instructions per enqueued job, django-wurk's client and Ruby Sidekiq's, under valgrind.

    python bench/enqueue_instructions.py [--python-only] [--repo PATH]

Wall-clock enqueue rates on a shared machine move by 2x from one run to the next; the
instructions a client executes per job do not (to within 1%). Each client runs twice
under ``valgrind --tool=cachegrind`` with a small and a large job count, both after the
same start-up, so the difference divided by the difference in jobs is the cost of one job:
``perform_async`` / ``Sidekiq::Client.push`` (1,000 and 3,000 jobs) and ``perform_bulk`` /
``push_bulk`` (5,000 and 25,000). User-space instructions only: the system calls (one
round trip per single push, one per 1,000 jobs in bulk) and the Redis server's own work
are the same for both and are not counted. ``--repo`` measures another checkout's
``django_wurk`` (say, main) with this file's harness, for before/after figures.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench.harness import RedisServer

ROOT = Path(__file__).resolve().parents[1]
COUNTS = {"single": (1_000, 3_000), "bulk": (5_000, 25_000)}


def instructions(command: list[str], cwd: Path, env: dict[str, str], url: str) -> int:
    redis.Redis.from_url(url).flushdb()
    proc = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode or match is None:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    return int(match.group(1).replace(",", ""))


def per_job(command: list[str], mode: str, cwd: Path, env: dict[str, str], url: str) -> int:
    small, large = COUNTS[mode]
    flag = ["--bulk"] if mode == "bulk" else []
    a = instructions([*command, "enqueue", "noop", str(small), *flag], cwd, env, url)
    b = instructions([*command, "enqueue", "noop", str(large), *flag], cwd, env, url)
    return (b - a) // (large - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-only", action="store_true", help="skip Ruby Sidekiq")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose django_wurk is measured")
    opts = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    server = RedisServer()
    server.start()
    try:
        url = server.url
        env = dict(
            os.environ,
            PYTHONHASHSEED="0",
            PYTHONPATH=str(opts.repo),
            DJANGO_SETTINGS_MODULE="bench.settings",
            WURK_REDIS_URL=url,
            BENCH_REDIS_URL=url,
            REDIS_URL=url,
        )
        systems = {"django-wurk": [sys.executable, "bench/client.py", "bench.benchapp.client"]}
        if not opts.python_only and shutil.which("ruby"):
            systems["Sidekiq (Ruby)"] = ["ruby", "bench/ruby/client.rb"]
        print(f"instructions per job ({server.description}; {opts.repo})")
        for name, command in systems.items():
            cwd = opts.repo if name == "django-wurk" else ROOT
            figures = {mode: per_job(command, mode, cwd, env, url) for mode in COUNTS}
            print(f"  {name:16s} one by one {figures['single']:>9,}   bulk {figures['bulk']:>9,}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
