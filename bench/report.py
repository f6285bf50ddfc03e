"""The tables bench/run.py prints (Markdown, so they paste into docs/benchmarks.md).

Everything here works on the results dict (the JSON of bench/results/latest.json), so
``python bench/report.py [FILE]`` prints the tables of an earlier run again.
"""

from __future__ import annotations

import json
import statistics
import sys
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
            f"{v['label'].split(' ')[0]} {v['version']}"
            for k, v in self.info.items()
            if v["version"] and k != "wurk-p1"
        )
        self.lines += [
            f"{meta['date']}; {meta['cpu']}, {meta['cores']} cores, {meta['ram_gb']} GB RAM; "
            f"{meta['os']}; Python {meta['python']}; {meta['server']}.",
            f"Versions: {versions} (django_wurk source {meta.get('wurk_source', '?')}).",
            f"Medians over {rounds} round{'s' if rounds > 1 else ''}, (min - max) across rounds. "
            f"Load average before / after: {meta.get('load_before', '?')} / {meta.get('load_after', '?')}.",
            "",
        ]
        if self.results["drain"] or self.results["enqueue"] or self.results["memory"]:
            self.targets()
            self.throughput()
            self.enqueue_rates()
            self.latency()
            self.memory()
        self.batches()
        self.failures()
        return "\n".join(self.lines)

    def targets(self) -> None:
        rows: list[list[str]] = []

        def ratio_row(measure: str, goal: float, values: Series, needs: str = "") -> None:
            if needs and not self.available(needs):
                rows.append([measure, f">= {goal}x", f"{self.label(needs)} not available", "n/a"])
                return
            m = median(values)
            verdict = "n/a" if m is None else "met" if m >= goal else "MISSED"
            rows.append([measure, f">= {goal}x", spread(values, "{:.2f}x"), verdict])

        p2 = self.drain("wurk-p2", "noop")
        ratio_row(
            "noop drain: -P 2 -c 10 / Sidekiq -c 10",
            1.0,
            ratios(p2, self.drain("sidekiq", "noop")),
            "sidekiq",
        )
        peers = [k for k in PEERS if self.drain(k, "noop")]
        if peers:
            per_round = zip(*(self.drain(k, "noop") for k in peers), strict=False)
            best = [max((r for r in rnd if r is not None), default=None) for rnd in per_round]
            top = max(peers, key=lambda k: median(self.drain(k, "noop")) or 0)
            ratio_row(
                f"noop drain: -P 2 / best Python peer (in the median: {self.label(top)})",
                3.0,
                ratios(p2, best),
            )
        ratio_row("noop drain: -P 2 / -P 1", 1.7, ratios(p2, self.drain("wurk-p1", "noop")))
        for mode, measure in (
            ("single", "perform_async / Sidekiq push"),
            ("bulk", "perform_bulk / Sidekiq push_bulk"),
        ):
            ratio_row(
                measure, 1.0, ratios(self.enqueue("wurk-p2", mode), self.enqueue("sidekiq", mode)), "sidekiq"
            )

        lat = [v for k in ("wurk-p2", "wurk-p1") if (v := self.results["latency"].get(k))]
        if lat:
            p50, p99 = (max(pct(v, p) for v in lat) * 1e3 for p in (50, 99))
            verdict = "met" if p50 <= 2 and p99 <= 20 else "MISSED"
            measured = f"{p50:.2f} ms / {p99:.2f} ms"
            rows.append(["enqueue -> start at idle, p50 / p99", "<= 2 ms / <= 20 ms", measured, verdict])
        boots = [b for k in ("wurk-p1", "wurk-p2") if (b := self.results["boot"].get(k))]
        if boots:
            worst: list[float | None] = max(boots, key=lambda b: median(b) or 0.0)
            verdict = "met" if (median(worst) or 0) <= 1.5 else "MISSED"
            rows.append(["runwurk start -> first job", "<= 1.5 s", spread(worst, "{:.2f} s"), verdict])
        mem = self.results["memory"].get("wurk-p1")
        if mem:
            verdict = "met" if mem["end_mb"] <= 80 and mem["growth_mb"] <= 2 else "MISSED"
            measure = f"worker RSS after {mem['jobs']:,} jobs (-P 1); growth after warm-up"
            measured = f"{mem['end_mb']:.1f} MB; {mem['growth_mb']:+.1f} MB"
            rows.append([measure, "<= 80 MB; none (<= 2 MB)", measured, verdict])
        extra = self.batch_extra_round_trips()
        if extra:
            m = median(extra)
            verdict = "n/a" if m is None else "met" if m <= 1.01 else "MISSED"
            measure = "batch: extra round trips per job (worker)"
            rows.append([measure, "<= 1", spread(extra, "{:.3f}"), verdict])
        note = "latency and boot: the worse of -P 1 and -P 2"
        self.table(f"Targets ({note})", ["measure", "target", "measured", "verdict"], rows)

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
            if key != "wurk-p2" and self.available(key):
                cells = [
                    spread(ratios(self.drain("wurk-p2", w), self.drain(key, w)), "{:.2f}x") for w in WORKLOADS
                ]
                rows.append([info["label"], *cells])
        self.table("django-wurk -P 2 -c 10 / each system (same round)", ["system", *WORKLOADS], rows)

    def enqueue_rates(self) -> None:
        rows = []
        for key, info in self.info.items():
            if key in self.results["enqueue"]:
                name = "django-wurk" if key.startswith("wurk") else info["label"]
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
