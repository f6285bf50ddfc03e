"""The per-job cost of one worker process, in instructions: an in-process drain under callgrind.

Wall-clock drains on a shared 2-core machine swing by 2x with the load; instruction counts
do not. ``callgrind`` runs a worker (a ``Launcher`` with ``-c 10``, as ``runwurk -P 1``
runs it, logging as ``-v 0`` or as the default ``-v 1``) that drains noop jobs queued
beforehand by this driver, twice: with a small and a large number of jobs. The difference
over the difference in jobs is the cost of one job, with start-up, Django's import and the
stop cancelled out.

    .venv/bin/python bench/inproc.py callgrind              # per-job instructions, -v 0 and -v 1
    .venv/bin/python bench/inproc.py callgrind --log on     # only with the per-job log lines
    .venv/bin/python bench/inproc.py callgrind --priority 5 # every job at priority 5 (queue:default@5)
    .venv/bin/python bench/inproc.py ab --tree /tmp/base    # wall-clock A/B, this tree against another
    .venv/bin/python bench/inproc.py ab --tree /tmp/base --runwurk --log on   # the same with runwurk -P 1
    .venv/bin/python bench/inproc.py drain --url URL --jobs N [--log]   # one drain (what the above run)

``--tree`` runs the worker from another checkout (e.g. ``git archive main | tar -x -C
/tmp/base``) with this virtualenv; the drain prints which ``django_wurk`` it ran. Per-job
log lines go to ``/dev/null`` through the same handler and formatter as ``runwurk``'s
``--logfile``, so the cost is formatting and writing, not a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def drain(url: str, jobs: int, log: bool, concurrency: int) -> None:
    """Run a worker in this process until ``jobs`` noop jobs (queued already) have finished."""
    import logging

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ["WURK_REDIS_URL"] = url
    os.environ["BENCH_REDIS_URL"] = url
    import django

    django.setup()
    import django_wurk
    from bench import jobside
    from bench.benchapp import jobs as _jobs  # noqa: F401 (registers the jobs)
    from django_wurk import logging as wurk_logging
    from django_wurk.conf import build_config
    from django_wurk.core.engine import wurk
    from django_wurk.core.worker import Launcher
    from django_wurk.db import CloseOldConnections

    config = build_config({"CONCURRENCY": concurrency, "QUEUES": None, "TIMEOUT": 5})
    wurk_logging.configure(logging.INFO if log else logging.WARNING, "text", os.devnull)
    wurk.configure(config)
    if CloseOldConnections not in wurk.server_middleware:
        wurk.server_middleware.prepend(CloseOldConnections)
    launcher = Launcher(wurk)
    cpu0 = time.process_time()
    launcher.start()
    deadline = time.monotonic() + 60 + jobs / 20
    while jobside._done < jobs:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {jobside._done}/{jobs} jobs done")
        time.sleep(0.005)
    cpu = time.process_time() - cpu0
    span = jobside._last - jobside._first
    launcher.stop()
    print(
        json.dumps(
            {
                "jobs": jobs,
                "rate": jobs / span,
                "cpu_us_per_job": cpu / jobs * 1e6,
                "module": django_wurk.__file__,
            }
        )
    )


def _server() -> object:
    sys.path.insert(0, str(ROOT))
    from bench.harness import RedisServer

    server = RedisServer()
    server.start()
    return server


def _fill(url: str, jobs: int, priority: int = 0) -> None:
    """Queue noop jobs as the bench's client does (a bulk push), outside the measured process;
    with a ``priority``, into the default queue's list of that priority (docs/priority.md)."""
    import redis

    r = redis.Redis.from_url(url)
    r.flushall()
    env = dict(os.environ, WURK_REDIS_URL=url, BENCH_REDIS_URL=url, PYTHONPATH=str(ROOT))
    code = f"from bench.benchapp.client import push_bulk; push_bulk('noop', [()] * {jobs})"
    if priority:
        code = "from bench.benchapp.client import JOBS; "
        code += f"JOBS['noop'].set(priority={priority}).perform_bulk([()] * {jobs})"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)


def _runwurk(url: str, jobs: int, log: bool, tree: Path, concurrency: int) -> dict:
    """The same drain by ``runwurk -P 1`` (per-job lines to stderr, into a file), timed as the bench does."""
    import redis

    _fill(url, jobs)
    r = redis.Redis.from_url(url, decode_responses=True)
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}", DJANGO_SETTINGS_MODULE="bench.settings")
    env.update(WURK_REDIS_URL=url, BENCH_REDIS_URL=url)
    cmd = [sys.executable, "-m", "django", "runwurk", "-P", "1", "-c", str(concurrency), "-q", "default"]
    cmd += ["-t", "5"] + ([] if log else ["-v", "0"])
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=out, stderr=out, start_new_session=True)
        try:
            deadline = time.monotonic() + 60 + jobs / 1000
            while int(r.get("bench:done") or 0) < jobs:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"runwurk in {tree}: {r.get('bench:done')}/{jobs} jobs done")
                time.sleep(0.02)
            pid = proc.pid
            span = float(r.get(f"bench:last:{pid}")) - float(r.get(f"bench:first:{pid}"))  # type: ignore[arg-type]
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(30)
    return {"jobs": jobs, "rate": jobs / span, "cpu_us_per_job": float("nan")}


def _run(
    url: str, jobs: int, log: bool, tree: Path, concurrency: int, valgrind: bool, priority: int = 0
) -> tuple[dict, int]:
    _fill(url, jobs, priority)
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}", PYTHONHASHSEED="0")
    cmd = [sys.executable, str(ROOT / "bench" / "inproc.py"), "drain", "--url", url, "--jobs", str(jobs)]
    cmd += ["--concurrency", str(concurrency)] + (["--log"] if log else [])
    instructions = 0
    with tempfile.TemporaryDirectory() as tmp:
        if valgrind:
            out = Path(tmp) / "callgrind.out"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        if valgrind:
            instructions = int(re.search(r"Collected : (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    return json.loads(proc.stdout.strip().splitlines()[-1]), instructions


def callgrind(args: argparse.Namespace) -> None:
    server = _server()
    try:
        small, large = args.jobs
        for log in {"off": [False], "on": [True], "both": [False, True]}[args.log]:
            counts = []
            for _ in range(args.repeat):
                _, a = _run(server.url, small, log, args.tree, args.concurrency, True, args.priority)  # type: ignore[attr-defined]
                _, b = _run(server.url, large, log, args.tree, args.concurrency, True, args.priority)  # type: ignore[attr-defined]
                counts.append((b - a) / (large - small))
            print(
                f"logging {'on ' if log else 'off'}: {statistics.median(counts):,.0f} instructions per job"
                f" ({', '.join(f'{c:,.0f}' for c in counts)}; {small} and {large} jobs; {args.tree})"
            )
    finally:
        server.stop()  # type: ignore[attr-defined]


def ab(args: argparse.Namespace) -> None:
    server = _server()
    trees = {"A (this tree)": ROOT, f"B ({args.tree})": args.tree}
    rates: dict[str, list[float]] = {k: [] for k in trees}
    cpus: dict[str, list[float]] = {k: [] for k in trees}
    try:
        for i in range(args.repeat):
            order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                if args.runwurk:
                    result = _runwurk(server.url, args.jobs[-1], args.log == "on", tree, args.concurrency)  # type: ignore[attr-defined]
                else:
                    result, _ = _run(
                        server.url, args.jobs[-1], args.log == "on", tree, args.concurrency, False
                    )  # type: ignore[attr-defined]
                rates[name].append(result["rate"])
                cpus[name].append(result["cpu_us_per_job"])
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        for name in trees:
            each = ", ".join(f"{r:,.0f}" for r in rates[name])
            print(
                f"{name}: median {statistics.median(rates[name]):,.0f} jobs/s, "
                f"{statistics.median(cpus[name]):.1f} us CPU per job ({each})"
            )
        print(f"load average after: {' '.join(load)}")
    finally:
        server.stop()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("drain")
    one.add_argument("--url", required=True)
    one.add_argument("--jobs", type=int, required=True)
    one.add_argument("--log", action="store_true")
    one.add_argument("--concurrency", type=int, default=10)
    for name, default in (("callgrind", "2000,8000"), ("ab", "20000")):
        p = sub.add_parser(name)
        p.add_argument("--jobs", type=lambda s: [int(n) for n in s.split(",")], default=default.split(","))
        p.add_argument(
            "--log", choices=["off", "on", "both"], default="both" if name == "callgrind" else "off"
        )
        p.add_argument("--tree", type=Path, default=ROOT)
        p.add_argument("--repeat", type=int, default=1 if name == "callgrind" else 6)
        p.add_argument("--concurrency", type=int, default=10)
        if name == "callgrind":
            p.add_argument("--priority", type=int, default=0, help="push every job at this priority")
        if name == "ab":
            p.add_argument(
                "--runwurk", action="store_true", help="drain with runwurk -P 1, not in this process"
            )
    args = parser.parse_args()
    if isinstance(getattr(args, "jobs", None), list):
        args.jobs = [int(n) for n in args.jobs]
    if args.command == "drain":
        drain(args.url, args.jobs, args.log, args.concurrency)
    elif args.command == "callgrind":
        callgrind(args)
    else:
        ab(args)


if __name__ == "__main__":
    main()
