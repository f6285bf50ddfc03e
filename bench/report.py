"""The tables bench/run.py prints (Markdown, so they paste into docs/benchmarks.md).

Everything here works on the results dict (the JSON of bench/results/latest.json), so
``python bench/report.py [FILE]`` prints the tables of an earlier run again.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKLOADS = ("noop", "cpu", "io")
PEERS = ("huey", "dramatiq", "celery", "rq")
Series = list[float | None]


def pct(values: list[float], p: float) -> float:
    """The p-th percentile, nearest rank."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * p // 100)))
    return ordered[int(rank) - 1]


def median(values: Series) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def spread(values: Series, fmt: str = "{:,.0f}") -> str:
    """'median (min-max)' of the values that exist."""
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    if len(got) == 1:
        return fmt.format(got[0])
    return f"{fmt.format(statistics.median(got))} ({fmt.format(min(got))} - {fmt.format(max(got))})"


def ratios(a: Series, b: Series) -> Series:
    """Per-round ratios a/b: both figures come from the same round."""
    return [x / y if x is not None and y else None for x, y in zip(a, b, strict=False)]


@dataclass
class Target:
    """One row of the targets table: a figure per round (or one overall figure, ``measured``)."""

    measure: str
    goal: str  # "" for a figure shown for comparison only
    values: Series
    verdict: str
    fmt: str = "{:.2f}x"
    measured: str = ""


#: (measure, numerator, denominator, goal): drain ratios on noop jobs, issue 16's targets and
#: the comparisons it asks to print beside them (goal None).
DRAIN_RATIOS: tuple[tuple[str, str, str, float | None], ...] = (
    ("per process: -P 1 -c 10 / Sidekiq -c 10", "wurk-p1", "sidekiq", 1.0),
    ("same cores: -P 2 -c 10 / 2 Sidekiq processes -c 10", "wurk-p2", "sidekiq-x2", 1.3),
    ("-P 2 -c 10 / one Sidekiq process", "wurk-p2", "sidekiq", None),
    ("with per-job logging, per process: -P 1 / Sidekiq", "wurk-p1-log", "sidekiq-log", 1.0),
    ("with per-job logging, same cores: -P 2 / 2 Sidekiq processes", "wurk-p2-log", "sidekiq-x2-log", 1.3),
    ("without hiredis, per process: -P 1 / Sidekiq", "wurk-p1-nohiredis", "sidekiq", 1.0),
    ("without hiredis, same cores: -P 2 / 2 Sidekiq processes", "wurk-p2-nohiredis", "sidekiq-x2", 1.3),
    ("without hiredis: -P 2 / one Sidekiq process", "wurk-p2-nohiredis", "sidekiq", None),
)
#: Each Sidekiq version's configurations, one process and two: every drain ratio against
#: "Sidekiq" is also shown against the fastest of them in the same round, per version.
SIDEKIQ_VERSIONS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("6.4.1", ("sidekiq", "sidekiq-hiredis"), ("sidekiq-x2", "sidekiq-x2-hiredis")),
    ("7.3", ("sidekiq7",), ("sidekiq7-x2",)),
    ("8.0", ("sidekiq8",), ("sidekiq8-x2",)),
)
#: (measure, django-wurk system, one process or two, goal) for the per-version rows.
FASTEST_RATIOS: tuple[tuple[str, str, int, float | None], ...] = (
    ("per process: -P 1 / fastest Sidekiq {v}", "wurk-p1", 1, 1.0),
    ("same cores: -P 2 / fastest 2 Sidekiq {v} processes", "wurk-p2", 2, 1.3),
    ("-P 2 / fastest one Sidekiq {v} process", "wurk-p2", 1, None),
    ("without hiredis, per process: -P 1 / fastest Sidekiq {v}", "wurk-p1-nohiredis", 1, 1.0),
    ("without hiredis, same cores: -P 2 / fastest 2 Sidekiq {v} processes", "wurk-p2-nohiredis", 2, 1.3),
)
#: (measure, django-wurk system, Sidekiq system): Sidekiq's CPU per noop job / django-wurk's.
CPU_RATIOS: tuple[tuple[str, str, str], ...] = (
    ("CPU per job, worker + Redis: Sidekiq / -P 1", "wurk-p1", "sidekiq"),
    ("CPU per job, worker + Redis: 2 Sidekiq processes / -P 2", "wurk-p2", "sidekiq-x2"),
)
#: (measure, django-wurk client, Sidekiq mode, goal)
ENQUEUE_RATIOS: tuple[tuple[str, str, str, float], ...] = (
    ("enqueue: perform_async / Sidekiq push", "wurk-p2", "single", 1.2),
    ("enqueue: perform_bulk / Sidekiq push_bulk", "wurk-p2", "bulk", 1.2),
    ("enqueue without hiredis: perform_async / push", "wurk-p2-nohiredis", "single", 1.2),
    ("enqueue without hiredis: perform_bulk / push_bulk", "wurk-p2-nohiredis", "bulk", 1.2),
)
#: The targets' thresholds: idle latency p50 and p99 (ms), boot (s), RSS growth (MB).
LATENCY_P50_MS, LATENCY_P99_MS, BOOT_S, RSS_GROWTH_MB = 1.0, 10.0, 0.5, 2.0


def verdict(values: Series, goal: float | None) -> str:
    m = median(values)
    if goal is None:
        return ""
    return "n/a" if m is None else "met" if m >= goal else "MISSED"


def target_rows(results: dict[str, Any]) -> list[Target]:
    """Issue 16's targets, from a results dict. A ratio whose two systems were not both run is
    left out (a ``--systems`` subset); one whose system could not run says so."""
    info: dict[str, dict[str, Any]] = results["systems"]
    rows: list[Target] = []

    def ratio_row(measure: str, a: Series, b: Series, keys: tuple[str, str], goal: float | None) -> None:
        missing = [k for k in keys if info[k]["unavailable"]]
        if missing:
            reason = "; ".join(f"{info[k]['label']}: {info[k]['unavailable']}" for k in missing)
            rows.append(Target(measure, goal_text(goal), [], "n/a", measured=f"not available ({reason})"))
            return
        values = ratios(a, b)
        rows.append(Target(measure, goal_text(goal), values, verdict(values, goal)))

    def drain(key: str) -> Series:
        return list(results["drain"].get(key, {}).get("noop", []))

    for measure, a, b, goal in DRAIN_RATIOS:
        if a in info and b in info:
            ratio_row(measure, drain(a), drain(b), (a, b), goal)
    # Against each version's fastest configuration, round by round (the faster driver wins).
    for version, single, double in SIDEKIQ_VERSIONS:
        for template, a, processes, goal in FASTEST_RATIOS:
            group = [k for k in (single if processes == 1 else double) if k in info]
            ran = [k for k in group if not info[k]["unavailable"]]
            if a not in info or not group:
                continue
            if not ran:
                ratio_row(template.format(v=version), [], [], (a, group[0]), goal)
                continue
            rounds = zip(*(drain(k) for k in ran), strict=False)
            fastest: Series = [max((x for x in r if x is not None), default=None) for r in rounds]
            ratio_row(template.format(v=version), drain(a), fastest, (a, ran[0]), goal)
    # The same comparisons in CPU per job (worker + Redis), which a busy machine moves least:
    # a second opinion when the drain ratios swing (no target; higher means django-wurk cheaper).
    for measure, a, b in CPU_RATIOS:
        if a in info and b in info and not (info[a]["unavailable"] or info[b]["unavailable"]):
            rows.append(
                Target(measure, goal_text(None), ratios(cpu_per_job(results, b), cpu_per_job(results, a)), "")
            )
    enq = results["enqueue"]
    for measure, key, mode, goal in ENQUEUE_RATIOS:
        # -P 1 and -P 2 share a client, measured as -P 2, or as -P 1 when -P 2 was not run.
        key = key if key in enq else key.replace("-p2", "-p1")
        if key in info and "sidekiq" in info:
            a, b = enq.get(key, {}).get(mode, []), enq.get("sidekiq", {}).get(mode, [])
            ratio_row(measure, list(a), list(b), (key, "sidekiq"), goal)

    lat = [v for k in ("wurk-p2", "wurk-p1") if (v := results["latency"].get(k))]
    if lat:
        p50, p99 = (max(pct(v, p) for v in lat) * 1e3 for p in (50, 99))
        ok = p50 <= LATENCY_P50_MS and p99 <= LATENCY_P99_MS
        rows.append(
            Target(
                "enqueue -> start at idle, p50 / p99",
                f"<= {LATENCY_P50_MS:g} ms / <= {LATENCY_P99_MS:g} ms",
                [],
                "met" if ok else "MISSED",
                measured=f"{p50:.2f} ms / {p99:.2f} ms",
            )
        )
    boots = [b for k in ("wurk-p1", "wurk-p2") if (b := results["boot"].get(k))]
    if boots:
        worst: Series = max(boots, key=lambda b: median(b) or 0.0)
        ok = (median(worst) or 0) <= BOOT_S
        rows.append(
            Target(
                "runwurk start -> first job", f"<= {BOOT_S:g} s", worst, "met" if ok else "MISSED", "{:.2f} s"
            )
        )
    mem = results["memory"].get("wurk-p1")
    if mem:
        ok = mem["growth_mb"] <= RSS_GROWTH_MB
        rows.append(
            Target(
                f"worker RSS over {mem['jobs']:,} jobs (-P 1): growth after warm-up",
                f"flat (<= {RSS_GROWTH_MB:g} MB)",
                [],
                "met" if ok else "MISSED",
                measured=f"{mem['growth_mb']:+.1f} MB (at the end {mem['end_mb']:.1f} MB)",
            )
        )
    return rows


def cpu_per_job(results: dict[str, Any], key: str) -> Series:
    """Per round: the worker's user + system CPU and Redis's, µs per noop job (None where the
    drain failed or was not gated)."""
    runs = (results.get("usage") or {}).get(key, {}).get("noop", [])
    return [u["user_us"] + u["sys_us"] + u["redis_us"] if u and "redis_us" in u else None for u in runs]


def goal_text(goal: float | None) -> str:
    return "(for comparison)" if goal is None else f">= {goal}x"


class Report:
    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.info: dict[str, dict[str, Any]] = results["systems"]
        self.lines: list[str] = []

    def label(self, key: str) -> str:
        return str(self.info[key]["label"]) if key in self.info else key

    def drain(self, key: str, workload: str) -> Series:
        return list(self.results["drain"].get(key, {}).get(workload, []))

    def enqueue(self, key: str, mode: str) -> Series:
        return list(self.results["enqueue"].get(key, {}).get(mode, []))

    def available(self, key: str) -> bool:
        return key in self.info and not self.info[key]["unavailable"]

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.lines += [f"### {title}", "", "| " + " | ".join(header) + " |"]
        self.lines.append("|" + "|".join("---" for _ in header) + "|")
        self.lines += ["| " + " | ".join(row) + " |" for row in rows]
        self.lines.append("")

    def render(self) -> str:
        meta = self.results["meta"]
        rounds = meta["counts"]["rounds"]
        versions = ", ".join(
            dict.fromkeys(
                f"{v['label'].split(' ')[0]} {v['version']}" for v in self.info.values() if v["version"]
            )
        )
        self.lines += [
            f"{meta['date']}; {meta['cpu']}, {meta['cores']} cores, {meta['ram_gb']} GB RAM; "
            f"{meta['os']}; Python {meta['python']}; {meta['server']}.",
            f"Versions: {versions} (django_wurk source {meta.get('wurk_source', '?')}).",
            f"Medians over {rounds} round{'s' if rounds > 1 else ''}, (min - max) across rounds. "
            f"Load average before / after: {meta.get('load_before', '?')} / {meta.get('load_after', '?')}"
            + (
                f"; at each round's start: {', '.join(map(str, load))}."
                if (load := self.results.get("round_load"))
                else "."
            ),
            f"hiredis {meta.get('hiredis', '?')}; clocksource {meta.get('clocksource', '?')}; "
            f"CPU {meta.get('cpu_mhz', '?')} MHz; "
            + "; ".join(f"{k}: {v}" for k, v in (meta.get("mitigations") or {}).items())
            + ".",
            "",
        ]
        if self.results["drain"] or self.results["enqueue"] or self.results["memory"]:
            self.targets()
            self.throughput()
            self.usage()
            self.enqueue_rates()
            self.latency()
            self.memory()
        self.batches()
        self.failures()
        return "\n".join(self.lines)

    def targets(self) -> None:
        rows = []
        for t in target_rows(self.results):
            rounds = ", ".join("-" if v is None else t.fmt.format(v) for v in t.values) if t.values else ""
            rows.append([t.measure, t.goal, t.measured or spread(t.values, t.fmt), rounds, t.verdict])
        note = (
            "ratios per round, both figures from the same round; latency and boot: the worse of -P 1 and -P 2"
        )
        self.table(
            f"Targets (issue 16; {note})",
            ["measure", "target", "median (min - max)", "rounds", "verdict"],
            rows,
        )

    def throughput(self) -> None:
        rows = []
        for key, info in self.info.items():
            cells = (
                [spread(self.drain(key, w)) for w in WORKLOADS]
                if self.available(key)
                else ["not available"] * 3
            )
            rows.append([info["label"], info["topology"], str(info["slots"]), *cells])
        self.table("Drain throughput, jobs/s", ["system", "topology", "slots", *WORKLOADS], rows)

        rows = []
        for key, info in self.info.items():
            # The variants (noop only) have their own ratios in the targets table.
            if key != "wurk-p2" and self.available(key) and len(info.get("workloads", WORKLOADS)) > 1:
                cells = [
                    spread(ratios(self.drain("wurk-p2", w), self.drain(key, w)), "{:.2f}x") for w in WORKLOADS
                ]
                rows.append([info["label"], *cells])
        self.table("django-wurk -P 2 -c 10 / each system (same round)", ["system", *WORKLOADS], rows)

    def usage(self) -> None:
        """What the drains cost, not how fast they went: CPU per job is what a busy machine
        changes least (a starved worker runs slower, not dearer). ``cores`` below 1 for a
        one-process system means it did not get a whole core for the drain."""
        rows = []
        got = self.results.get("usage") or {}
        for key, info in self.info.items():
            runs = [u for u in got.get(key, {}).get("noop", []) if u]
            if not runs:
                continue

            def field(name: str, runs: list[dict[str, float]] = runs) -> Series:
                return [u.get(name) for u in runs]

            rows.append(
                [
                    info["label"],
                    spread(field("user_us"), "{:.1f}"),
                    spread(field("sys_us"), "{:.1f}"),
                    spread(field("redis_us"), "{:.1f}"),
                    spread(field("switches"), "{:.2f}"),
                    spread(field("cores"), "{:.2f}"),
                    spread(field("machine_busy"), "{:.0%}"),
                    spread(field("steal"), "{:.0%}"),
                ]
            )
        header = ["system", "user µs/job", "system µs/job", "Redis µs/job", "switches/job", "cores busy",
                  "machine busy", "steal"]  # fmt: skip
        if rows:
            self.table(
                "CPU over the noop drains (the worker's process group, Redis, the machine)", header, rows
            )

    def enqueue_rates(self) -> None:
        rows = []
        for key, info in self.info.items():
            if key in self.results["enqueue"]:
                name = info["label"]
                if key.startswith("wurk"):
                    name = "django-wurk" + (", no hiredis" if "nohiredis" in key else "")
                rows.append([name, spread(self.enqueue(key, "single")), spread(self.enqueue(key, "bulk"))])
        self.table("Enqueue, jobs/s (no worker running)", ["client", "one by one", "bulk"], rows)

    def latency(self) -> None:
        rows = []
        for key, info in self.info.items():
            lats = self.results["latency"].get(key)
            if lats:
                ms = [f"{x * 1e3:.2f}" for x in (pct(lats, 50), pct(lats, 99), max(lats))]
                rows.append([info["label"], str(len(lats)), *ms, spread(self.results["boot"][key], "{:.2f}")])
        header = ["system", "samples", "p50 ms", "p99 ms", "max ms", "boot s"]
        self.table("Idle latency (enqueue call -> job start) and boot (start -> first job)", header, rows)

    def memory(self) -> None:
        rows = []
        for key, m in self.results["memory"].items():
            mb = [f"{m[f]:.1f}" for f in ("warm_mb", "end_mb", "idle_mb", "peak_mb")]
            rows.append([self.label(key), f"{m['jobs']:,}", *mb, f"{m['growth_mb']:+.1f}"])
        if rows:
            header = ["system", "jobs", "after 10%", "at the end", "after 5 s idle", "peak", "growth"]
            self.table("Worker memory, RSS in MB", header, rows)

    def batch_runs(self) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
        got = self.results.get("batches") or {}
        plain, batch = list(got.get("plain", [])), list(got.get("batch", []))
        n = min(len(plain), len(batch))
        return plain[:n], batch[:n]

    def batch_extra_round_trips(self) -> Series:
        """Script calls per job, batch minus plain: the batch's acknowledgement (the worker makes
        no other extra call; the fetch and its acknowledgement are one script call either way)."""
        plain, batch = self.batch_runs()
        jobs = self.results["meta"]["counts"].get("batch", 10_000)
        return [(b["evalsha"] - p["evalsha"]) / jobs for p, b in zip(plain, batch, strict=True)]

    def batches(self) -> None:
        plain, batch = self.batch_runs()
        if not plain:
            return
        jobs = self.results["meta"]["counts"].get("batch", 10_000)

        def per_job(runs: list[dict[str, float]], field: str) -> Series:
            return [r[field] / jobs for r in runs]

        def field(runs: list[dict[str, float]], name: str) -> Series:
            return [r[name] for r in runs]

        pairs = list(zip(plain, batch, strict=True))
        overhead = [1e6 * (1 / b["rate"] - 1 / p["rate"]) for p, b in pairs]
        enqueue_overhead = [1e6 * (b["enqueue_s"] - p["enqueue_s"]) / jobs for p, b in pairs]
        plain_enqueue = [jobs / r["enqueue_s"] for r in plain]
        batch_enqueue = [jobs / r["enqueue_s"] for r in batch]
        rows = [
            [
                "drain, jobs/s",
                spread(field(plain, "rate")),
                spread(field(batch, "rate")),
                spread(ratios(field(batch, "rate"), field(plain, "rate")), "{:.2f}x"),
            ],
            ["drain: time added per job, µs", "", spread(overhead, "{:.1f}"), ""],
            [
                "script calls (EVALSHA) per job",
                spread(per_job(plain, "evalsha"), "{:.3f}"),
                spread(per_job(batch, "evalsha"), "{:.3f}"),
                f"+{spread(self.batch_extra_round_trips(), '{:.3f}')}",
            ],
            [
                "Redis commands per job, inside scripts too",
                spread(per_job(plain, "commands"), "{:.1f}"),
                spread(per_job(batch, "commands"), "{:.1f}"),
                "",
            ],
            [
                "enqueue, jobs/s (bulk, one batch)",
                spread(plain_enqueue),
                spread(batch_enqueue),
                spread(ratios(batch_enqueue, plain_enqueue), "{:.2f}x"),
            ],
            ["enqueue: time added per job, µs", "", spread(enqueue_overhead, "{:.1f}"), ""],
        ]
        extra = self.batch_extra_round_trips()
        m = median(extra)
        verdict = "n/a" if m is None else "met" if m <= 1.01 else "MISSED"
        rows.append(["target: extra round trips per job <= 1", "", f"{spread(extra, '{:.3f}')}", verdict])
        title = f"Batches: a {jobs:,}-job batch against the same jobs pushed in bulk (django-wurk -P 1 -c 10)"
        self.table(title, ["measure", "plain", "batch", "batch / plain"], rows)

    def failures(self) -> None:
        errors = [f"- {v['label']}: {e.splitlines()[0]}" for v in self.info.values() for e in v["errors"]]
        if errors:
            self.lines += ["### Failures", "", *errors, ""]


def report(results: dict[str, Any]) -> str:
    return Report(results).render()


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "latest.json"
    print(report(json.loads(path.read_text())))
