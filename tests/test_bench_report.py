"""The benchmark's pure parts: issue 16's ratio table, CPU usage arithmetic, the systems list,
and the no-hiredis shim (checked in a real interpreter). No timing is asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import Usage
from bench.report import cpu_per_job, ratios, report, target_rows
from bench.systems import all_systems

ROOT = Path(__file__).resolve().parents[1]


def system(label: str, unavailable: str | None = None) -> dict[str, Any]:
    return {
        "label": label,
        "topology": "t",
        "slots": 10,
        "version": "1",
        "unavailable": unavailable,
        "errors": [],
    }


def usage(user: float, sys_: float, redis: float) -> dict[str, float]:
    return {"user_us": user, "sys_us": sys_, "redis_us": redis, "switches": 1.0, "cores": 0.9,
            "machine_busy": 0.5, "steal": 0.0}  # fmt: skip


def results(**overrides: Any) -> dict[str, Any]:
    keys = ["wurk-p2", "wurk-p1", "sidekiq", "sidekiq-x2", "wurk-p1-log", "sidekiq-log", "wurk-p1-nohiredis"]
    base: dict[str, Any] = {
        "meta": {"date": "d", "cpu": "c", "cores": 2, "ram_gb": 1, "os": "o", "python": "3", "server": "s",
                 "counts": {"rounds": 3}},
        "systems": {k: system(k) for k in keys},
        "drain": {
            "wurk-p1": {"noop": [10_000.0, 12_000.0, None]},
            "sidekiq": {"noop": [10_000.0, 8_000.0, 9_000.0]},
            "wurk-p2": {"noop": [26_000.0, 30_000.0, 24_000.0]},
            "sidekiq-x2": {"noop": [20_000.0, 20_000.0, 20_000.0]},
            "wurk-p1-log": {"noop": [5_000.0, 5_000.0, 5_000.0]},
            "sidekiq-log": {"noop": [10_000.0, 10_000.0, 10_000.0]},
            "wurk-p1-nohiredis": {"noop": [8_000.0, 8_000.0, 8_000.0]},
        },
        "usage": {
            "wurk-p1": {"noop": [usage(20, 5, 5), None, usage(20, 5, 5)]},
            "sidekiq": {"noop": [usage(60, 20, 10), usage(60, 20, 10), usage(60, 20, 10)]},
        },
        "enqueue": {
            "wurk-p2": {"single": [12_000.0, 12_000.0, 12_000.0], "bulk": [100.0, 100.0, 100.0]},
            "sidekiq": {"single": [10_000.0, 10_000.0, 10_000.0], "bulk": [100.0, 100.0, 100.0]},
        },
        "boot": {"wurk-p1": [0.3, 0.4, 0.3], "wurk-p2": [0.4, 0.6, 0.6]},
        "latency": {"wurk-p1": [0.0005] * 98 + [0.02] * 2, "wurk-p2": [0.0004] * 100},
        "memory": {"wurk-p1": {"jobs": 100, "warm_mb": 40.0, "end_mb": 40.5, "idle_mb": 40.5, "peak_mb": 41.0,
                               "growth_mb": 0.5, "samples": []}},
        "batches": {},
    }  # fmt: skip
    base.update(overrides)
    return base


def rows_by_measure(res: dict[str, Any]) -> dict[str, Any]:
    return {row.measure: row for row in target_rows(res)}


def test_ratios_pair_figures_of_the_same_round() -> None:
    assert ratios([2.0, None, 3.0], [1.0, 1.0, 0.0]) == [2.0, None, None]


def test_drain_targets_are_per_round_ratios_with_issue_16s_goals() -> None:
    rows = rows_by_measure(results())
    per_process = rows["per process: -P 1 -c 10 / Sidekiq -c 10"]
    assert per_process.values == [1.0, 1.5, None]
    assert (per_process.goal, per_process.verdict) == (">= 1.0x", "met")  # median of 1.0 and 1.5
    same_cores = rows["same cores: -P 2 -c 10 / 2 Sidekiq processes -c 10"]
    assert same_cores.values == [1.3, 1.5, 1.2]
    assert (same_cores.goal, same_cores.verdict) == (">= 1.3x", "met")
    one_sidekiq = rows["-P 2 -c 10 / one Sidekiq process"]
    assert one_sidekiq.values == [2.6, 3.75, 24_000 / 9_000]
    assert (one_sidekiq.goal, one_sidekiq.verdict) == ("(for comparison)", "")
    logging = rows["with per-job logging, per process: -P 1 / Sidekiq"]
    assert (logging.values, logging.verdict) == ([0.5, 0.5, 0.5], "MISSED")
    no_hiredis = rows["without hiredis, per process: -P 1 / Sidekiq"]
    assert no_hiredis.values == [0.8, 1.0, 8_000 / 9_000]
    # Pairs of which a system was not run at all (a --systems subset) are left out.
    assert "with per-job logging, same cores: -P 2 / 2 Sidekiq processes" not in rows
    assert "without hiredis, same cores: -P 2 / 2 Sidekiq processes" not in rows


def test_each_version_s_fastest_configuration_is_taken_round_by_round() -> None:
    res = results()
    for key in ("sidekiq-hiredis", "sidekiq7", "sidekiq8"):
        res["systems"][key] = system(key)
    res["systems"]["sidekiq8"]["unavailable"] = "no ../shared"
    res["drain"]["sidekiq-hiredis"] = {"noop": [20_000.0, 4_000.0, None]}
    res["drain"]["sidekiq7"] = {"noop": [5_000.0, 6_000.0, 4_000.0]}
    rows = rows_by_measure(res)
    # 6.4.1: the faster of its two drivers in each round (20,000 hiredis, 8,000 and 9,000 redis-rb).
    fastest = rows["per process: -P 1 / fastest Sidekiq 6.4.1"]
    assert fastest.values == [0.5, 1.5, None] and fastest.goal == ">= 1.0x"
    assert rows["per process: -P 1 / fastest Sidekiq 7.3"].values == [2.0, 2.0, None]
    assert rows["per process: -P 1 / fastest Sidekiq 8.0"].measured.startswith("not available")
    # No two-process system of 7.3 was run: no such row.
    assert "same cores: -P 2 / fastest 2 Sidekiq 7.3 processes" not in rows


def test_a_system_that_could_not_run_is_named() -> None:
    res = results()
    res["systems"]["sidekiq-x2"] = system("Sidekiq x 2", unavailable="no ruby")
    row = rows_by_measure(res)["same cores: -P 2 -c 10 / 2 Sidekiq processes -c 10"]
    assert row.verdict == "n/a"
    assert "no ruby" in row.measured


def test_enqueue_latency_boot_and_memory_targets() -> None:
    rows = rows_by_measure(results())
    single = rows["enqueue: perform_async / Sidekiq push"]
    assert (single.values, single.goal, single.verdict) == ([1.2, 1.2, 1.2], ">= 1.2x", "met")
    assert rows["enqueue: perform_bulk / Sidekiq push_bulk"].verdict == "MISSED"
    latency = rows["enqueue -> start at idle, p50 / p99"]
    assert latency.measured == "0.50 ms / 20.00 ms"  # the worse of -P 1 and -P 2
    assert latency.verdict == "MISSED"  # p99 above 10 ms
    boot = rows["runwurk start -> first job"]
    assert (boot.values, boot.verdict) == ([0.4, 0.6, 0.6], "MISSED")  # -P 2's median is 0.6 s
    memory = rows["worker RSS over 100 jobs (-P 1): growth after warm-up"]
    assert memory.verdict == "met"


def test_cpu_per_job_compares_worker_and_redis_cpu() -> None:
    res = results()
    assert cpu_per_job(res, "wurk-p1") == [30, None, 30]
    row = rows_by_measure(res)["CPU per job, worker + Redis: Sidekiq / -P 1"]
    assert row.values == [3.0, None, 3.0]  # Sidekiq's CPU per job over django-wurk's
    assert row.verdict == ""


def test_the_report_renders_every_table() -> None:
    text = report(results())
    assert "### Targets (issue 16" in text
    assert (
        "| per process: -P 1 -c 10 / Sidekiq -c 10 | >= 1.0x | 1.25x (1.00x - 1.50x) | 1.00x, 1.50x, - | met |"
        in text
    )
    assert "### CPU over the noop drains" in text


def test_usage_summary_is_per_job_and_per_drain() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    before = Usage(user=0, system=0, switches=10, machine_busy=0, machine_steal=0, machine_total=0)
    after = Usage(
        user=tick, system=tick // 2, switches=1010, machine_busy=3, machine_steal=1, machine_total=4
    )
    got = (after - before).summary(jobs=1000, seconds=2.0)
    assert got["user_us"] == 1000.0
    assert got["switches"] == 1.0
    assert got["cores"] == (tick + tick // 2) / tick / 2.0
    assert (got["machine_busy"], got["steal"]) == (0.75, 0.25)


def test_systems_have_unique_keys_and_variants_run_noop_only() -> None:
    systems = {s.key: s for s in all_systems()}
    assert len(systems) == len(all_systems())
    for key in (
        "sidekiq-x2",
        "wurk-p1-log",
        "wurk-p2-log",
        "sidekiq-log",
        "sidekiq-x2-log",
        "wurk-p1-nohiredis",
    ):
        assert systems[key].workloads == ("noop",)
        assert not systems[key].latency
    assert len(systems["sidekiq-x2"].worker_commands("redis://x")) == 2
    assert "-v" not in systems["wurk-p1-log"].worker_command("redis://x")
    assert "-v" in systems["wurk-p1"].worker_command("redis://x")
    assert systems["sidekiq-log"].env(ROOT) == {"BENCH_SIDEKIQ_LOG": "1"}
    assert systems["wurk-p2"].registers == 2


def run_settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import bench.settings, redis.utils; print(redis.utils.HIREDIS_AVAILABLE)"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_nohiredis_system_hides_hiredis_and_settings_check_it() -> None:
    env = {s.key: s for s in all_systems()}["wurk-p1-nohiredis"].env(ROOT)
    hidden = run_settings(env)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.strip() == "False"
    # A process that expects hiredis but cannot import it fails loudly, and the other way round.
    assert "HIREDIS_AVAILABLE is False" in run_settings(env | {"BENCH_HIREDIS": "on"}).stderr
    assert "HIREDIS_AVAILABLE is True" in run_settings({"BENCH_HIREDIS": "off"}).stderr


def test_enqueue_ratios_use_the_p1_client_when_p2_was_not_run() -> None:
    res = results()
    del res["systems"]["wurk-p2"]
    res["enqueue"]["wurk-p1"] = res["enqueue"].pop("wurk-p2")
    assert rows_by_measure(res)["enqueue: perform_async / Sidekiq push"].values == [1.2, 1.2, 1.2]
