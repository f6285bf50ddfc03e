"""``manage.py wurk``: every subcommand through ``call_command`` (its text and its ``--json``),
its exit statuses, and a few through a real ``manage.py`` process (what a shell sees)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_wurk import Wurk, cli
from django_wurk.core import keys
from django_wurk.core.features.batches import Batch
from django_wurk.core.features.periodic.loops import LoopSpec, register
from tests import test_runwurk
from tests.conftest import free_port, queue_entries, wait_for
from tests.dashboard.conftest import add_process, failed, payload, push, zadd
from tests.jobsapp import jobs
from tests.test_periodic import EveryMinutes
from tests.test_runwurk import ROOT, identity_of, start, worker_env


def wurk_cmd(*args: str) -> str:
    out = io.StringIO()
    call_command("wurk", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def wurk_json(*args: str) -> Any:
    return json.loads(wurk_cmd(*args, "--json"))


def fails_with(status: int, *args: str) -> str:
    with pytest.raises(CommandError) as caught:
        wurk_cmd(*args)
    assert caught.value.returncode == status, (caught.value, caught.value.returncode)
    return str(caught.value)


def test_stats_and_queues(wurk: Wurk, r: Any) -> None:
    for i in range(3):
        push(r, payload(args=[i]))
    push(r, payload(), "critical")
    zadd(r, keys.RETRY, failed())
    stats = wurk_json("stats")
    assert (stats["enqueued"], stats["retries"], stats["queues"]) == (4, 1, {"critical": 1, "default": 3})
    assert "enqueued  4" in wurk_cmd("stats")
    wurk_cmd("pause", "critical")
    assert wurk_json("queues") == [
        {"name": "critical", "size": 1, "latency": pytest.approx(90, abs=5), "paused": True},
        {"name": "default", "size": 3, "latency": pytest.approx(90, abs=5), "paused": False},
    ]
    wurk_cmd("unpause", "critical")
    assert not r.sismember(keys.PAUSED, "critical")
    assert "no queue 'nope'" in fails_with(cli.FAILED, "pause", "nope")


def test_the_sets_list_with_a_limit_and_the_keyword_call(wurk: Wurk, r: Any) -> None:
    for i in range(30):
        zadd(r, keys.RETRY, failed(args=[i], kwargs={"mode": "x"}), 1_700_000_000.0 + i)
    listing = wurk_json("retry", "--limit", "5")
    assert listing["total"] == 30 and len(listing["entries"]) == 5
    assert [e["args"] for e in listing["entries"]] == [[29], [28], [27], [26], [25]]  # newest first
    assert listing["entries"][0]["call"] == '29, mode="x"'
    text = wurk_cmd("retry", "--limit", "2")
    assert (
        text.startswith("30 in retry, the first 2:")
        and 'app.jobs.Broken(29, mode="x")  ValueError: it broke' in text
    )
    assert wurk_json("dead") == {"total": 0, "entries": []}
    zadd(r, keys.SCHEDULE, payload(args=["later"]))
    assert [e["args"] for e in wurk_json("scheduled")["entries"]] == [["later"]]
    with pytest.raises(CommandError, match="invalid _positive value: '0'"):
        wurk_cmd("dead", "--limit", "0")


def test_retry_kill_and_delete_one_job_by_jid(wurk: Wurk, r: Any) -> None:
    retrying, scheduled, dead = failed(), payload(args=["s"]), failed(args=["d"])
    zadd(r, keys.RETRY, retrying)
    zadd(r, keys.SCHEDULE, scheduled)
    zadd(r, keys.DEAD, dead, time.time() - 60)
    assert wurk_json("retry", retrying["jid"]) == {"retried": retrying["jid"], "from": "retry"}
    [queued] = queue_entries(r)
    assert queued["jid"] == retrying["jid"] and queued["retry_count"] == 0  # "Retry now" lowers it
    assert wurk_json("kill", scheduled["jid"]) == {"killed": scheduled["jid"], "from": "schedule"}
    assert r.zcard(keys.SCHEDULE) == 0 and r.zcard(keys.DEAD) == 2
    assert "deleted" in wurk_cmd("delete", dead["jid"])
    assert r.zcard(keys.DEAD) == 1
    assert wurk_json("delete", retrying["jid"], "--queue", "default")["from"] == "queue:default"
    assert r.llen(keys.queue("default")) == 0
    assert "no job nope in retry, dead" in fails_with(cli.FAILED, "retry", "nope")
    assert "no job nope in retry, schedule" in fails_with(cli.FAILED, "kill", "nope")
    fails_with(cli.FAILED, "delete", "nope")


def test_retry_all_shows_progress_on_a_terminal_only(wurk: Wurk, r: Any) -> None:
    for i in range(1200):
        zadd(r, keys.DEAD, failed(args=[i]), 1_700_000_000.0 + i)
    screen = io.StringIO()
    outcome = cli.retry({"all": True, "dead": True, "jid": None}, cli.Terminal(out=screen, interactive=True))
    assert outcome.data == {"retried": 1200, "set": "dead"} and r.llen(keys.queue("default")) == 1200
    shown = screen.getvalue()
    assert "retrying dead: 1,000 of 1,200" in shown and shown.endswith("retrying dead: 1,200 of 1,200\n")
    quiet = io.StringIO()
    cli.retry({"all": True, "dead": False, "jid": None}, cli.Terminal(out=quiet, interactive=False))
    assert quiet.getvalue() == ""


def test_clear_asks_first(wurk: Wurk, r: Any) -> None:
    push(r, payload())
    options = {"queue": "default", "yes": False}
    with pytest.raises(cli.Failure) as no:
        cli.clear(options, cli.Terminal(out=io.StringIO(), interactive=True, ask=lambda q: "n"))
    assert no.value.status == cli.FAILED and r.llen(keys.queue("default")) == 1
    asked: list[str] = []
    cli.clear(
        options, cli.Terminal(out=io.StringIO(), interactive=True, ask=lambda q: asked.append(q) or "y")
    )
    assert asked == ["Delete the 1 job(s) in queue 'default'? [y/N] "] and r.llen(keys.queue("default")) == 0
    push(r, payload())
    # Nobody to ask (call_command's stdin is no terminal): refused, unless --yes.
    assert "pass --yes" in fails_with(cli.USAGE, "clear", "default")
    assert wurk_json("clear", "default", "--yes") == {"cleared": "default", "jobs": 1}
    assert not r.exists(keys.queue("default"))


#: runwurk's fixture that kills what a test started and left running.
stop_later = test_runwurk.stop_later


@pytest.mark.slow
def test_processes_quiet_and_stop_a_real_worker(
    wurk: Wurk, r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    worker = start(redis_url, "-c", "2")
    stop_later.append(worker)
    identity = identity_of(r, worker.pid)
    fake = add_process(r, busy_jobs=0)
    rows = {p["identity"]: p for p in wurk_json("processes")}
    assert set(rows) == {identity, fake} and rows[fake]["queues"] == ["default", "critical"]
    assert rows[identity]["pid"] == worker.pid and rows[identity]["concurrency"] == 2
    assert wurk_json("quiet", identity) == {"quiet": [identity]}
    wait_for(lambda: {p["identity"]: p["quiet"] for p in wurk_json("processes")}[identity])
    assert "no process 'nope'" in fails_with(cli.FAILED, "stop", "nope")
    assert sorted(wurk_json("stop", "--all")["stop"]) == sorted([identity, fake])
    assert worker.wait(30) == 0
    with pytest.raises(CommandError, match="one of the arguments identity --all is required"):
        wurk_cmd("stop")


def test_enqueue_by_name_with_arguments_keywords_queue_and_delay(wurk: Wurk, r: Any) -> None:
    out = wurk_json(
        "enqueue", "tests.jobsapp.jobs.tracked", "[3]", "--kwargs", '{"seconds": 0.5}', "--queue", "low"
    )
    [job] = queue_entries(r, "low")
    assert (out["jid"], job["args"], job["kwargs"]) == (job["jid"], [3], {"seconds": 0.5})
    wurk_cmd("enqueue", "tests.jobsapp.jobs.echo", "[1, 2]", "--in", "600")
    assert r.zcard(keys.SCHEDULE) == 1
    assert "missing a required argument: 'n'" in fails_with(
        cli.USAGE, "enqueue", "tests.jobsapp.jobs.tracked"
    )
    assert "ARGS_JSON must be a JSON list" in fails_with(
        cli.USAGE, "enqueue", "tests.jobsapp.jobs.echo", "{}"
    )
    fails_with(cli.USAGE, "enqueue", "tests.jobsapp.jobs.echo", "[1,")
    assert "no registered job" in fails_with(cli.FAILED, "enqueue", "os.system", '["ls"]')


@pytest.mark.parametrize("leading", ["", "-"])
def test_batch(wurk: Wurk, r: Any, monkeypatch: pytest.MonkeyPatch, leading: str) -> None:
    """A bid is URL-safe base64 and may begin with "-" (1 in 64): after ``--`` it is still
    read as the bid, not as an option."""
    from django_wurk.core.features.batches import batch as batch_module

    made = batch_module.new_bid
    monkeypatch.setattr(batch_module, "new_bid", lambda: leading + made()[len(leading) :])
    batch = Batch(description="nightly <import>")
    assert batch.bid.startswith(leading)
    with batch.jobs():
        jobs.echo.perform_async(1)
        jobs.echo.perform_async(2)
    data = json.loads(wurk_cmd("batch", "--json", "--", batch.bid))
    assert (data["total"], data["pending"], data["complete"], data["description"]) == (
        2,
        2,
        False,
        "nightly <import>",
    )
    assert "running: 0 of 2 succeeded, 2 pending" in wurk_cmd("batch", "--", batch.bid)
    fails_with(cli.FAILED, "batch", "nope")


def test_periodic_lists_loops_and_runs_one_by_lid_job_or_schedule_name(db: None, wurk: Wurk, r: Any,
                                                                       use_app_settings: Any) -> None:  # fmt: skip
    from django_wurk.models import Schedule
    from django_wurk.schedules import loop_spec

    use_app_settings(enqueue="immediate")
    loop = LoopSpec(EveryMinutes(), jobs.tracked.job_class, args=(1,), kwargs={"seconds": 0.1})
    register(r, loop, 1_700_000_000.0)
    row = Schedule.objects.create(name="nightly", cron="0 3 * * *", job="tests.jobsapp.jobs.echo", args=["x"])
    register(r, loop_spec(row, wurk.registry), 1_700_000_000.0)
    listed = wurk_json("periodic")
    assert listed["leader"] is None and {lp["job"] for lp in listed["loops"]} == {"tests.jobsapp.jobs.tracked",
                                                                                   "tests.jobsapp.jobs.echo"}  # fmt: skip
    assert wurk_json("periodic", "run", loop.lid)["lid"] == loop.lid
    wurk_cmd("periodic", "run", "tests.jobsapp.jobs.tracked")
    wurk_cmd("periodic", "run", "nightly")
    assert (
        sorted(j["class"] for j in queue_entries(r))
        == ["tests.jobsapp.jobs.echo"] + ["tests.jobsapp.jobs.tracked"] * 2
    )
    assert "no periodic loop 'nope'" in fails_with(cli.FAILED, "periodic", "run", "nope")
    assert "needs the loop" in fails_with(cli.USAGE, "periodic", "run")


def run_manage(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "django", "wurk", *args], cwd=ROOT, env=worker_env(redis_url),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.slow
def test_a_shell_sees_the_output_and_the_exit_statuses(wurk: Wurk, r: Any, redis_url: str) -> None:
    push(r, payload(args=[1]))
    ok = run_manage(redis_url, "stats", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["enqueued"] == 1, ok.stderr
    missing = run_manage(redis_url, "delete", "nope", "--json")
    assert missing.returncode == cli.FAILED and json.loads(missing.stdout)["error"].startswith("no job nope")
    # No terminal to ask on: refused, and the queue is left alone.
    unasked = run_manage(redis_url, "clear", "default")
    assert (
        unasked.returncode == cli.USAGE and "--yes" in unasked.stderr and r.llen(keys.queue("default")) == 1
    )
    usage = run_manage(redis_url, "retry", "--limit", "x")
    assert usage.returncode == 2 and "invalid" in usage.stderr
    down = run_manage(f"redis://127.0.0.1:{free_port()}/0", "stats")
    assert down.returncode == cli.UNAVAILABLE and "Redis does not answer" in down.stderr
