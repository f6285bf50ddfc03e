"""Enqueueing inside database transactions: on commit, never on rollback, and nothing lost.

These run on SQLite and, with ``DATABASE_URL`` pointing at PostgreSQL, on PostgreSQL
(``.ci/run`` does both). They need real commits, hence ``transaction=True``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction

from django_wurk import Config, Wurk
from django_wurk.conf import Settings
from django_wurk.models import OutboxEntry
from django_wurk.outbox import relay_once
from django_wurk.signals import push_failed
from tests.conftest import wait_for
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

DEAD_REDIS = "redis://127.0.0.1:1/0"


def queued_jids(r: Any, queue: str = "default") -> list[str]:
    return [json.loads(x)["jid"] for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def test_a_push_inside_a_transaction_waits_for_the_commit(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        jid = jobs.echo.perform_async(1)
        assert jid and len(jid) == 24  # returned at once
        assert r.llen("queue:default") == 0
    assert queued_jids(r) == [jid]


def test_a_rollback_pushes_nothing(wurk: Wurk, r: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.echo.perform_async(1)
        jobs.echo.perform_in(60, 2)
        jobs.echo.perform_bulk([(3,), (4,)])
        raise RuntimeError("roll back")
    assert r.llen("queue:default") == 0 and r.zcard("schedule") == 0


def test_savepoint_rollbacks_drop_only_their_own_jobs(wurk: Wurk, r: Any) -> None:
    with transaction.atomic():
        a = jobs.echo.perform_async("a")
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.echo.perform_async("b")
            raise RuntimeError("savepoint rolled back")
        with transaction.atomic():
            c = jobs.echo.perform_async("c")
        assert r.llen("queue:default") == 0
    assert queued_jids(r) == [a, c]


def test_outside_a_transaction_and_on_commit_false_push_at_once(wurk: Wurk, r: Any) -> None:
    first = jobs.echo.perform_async(1)
    assert queued_jids(r) == [first]
    with transaction.atomic():
        second = jobs.echo.set(on_commit=False).perform_async(2)
        assert queued_jids(r) == [first, second]
        payload = json.loads(r.lindex("queue:default", 0))
        assert "on_commit" not in payload and "using" not in payload  # delivery options are not stored


def test_immediate_mode_ignores_transactions(
    wurk: Wurk, r: Any, use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(enqueue="immediate")
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.echo.perform_async(1)
        raise RuntimeError("the push already happened")
    assert wurk.redis.llen("queue:default") == 1


def test_the_alias_comes_from_the_open_atomic_block_or_using(wurk: Wurk, r: Any) -> None:
    with transaction.atomic(using="other"):
        on_other = jobs.echo.perform_async("other")
        with transaction.atomic(using="default"):
            on_default = jobs.echo.perform_async("default")  # both open: DATABASE ("default") wins
        assert queued_jids(r) == [on_default]
        named = jobs.echo.set(using="other").perform_async("named")
        assert queued_jids(r) == [on_default]
    assert queued_jids(r) == [on_default, on_other, named]

    with transaction.atomic(using="default"):
        # `using` names a database with no open transaction: nothing to wait for.
        now = jobs.echo.set(using="other").perform_async("now")
        assert queued_jids(r)[-1] == now


def test_a_rollback_on_the_other_database_drops_its_jobs(wurk: Wurk, r: Any) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using="other"):
        jobs.echo.perform_async("lost with the rollback")
        raise RuntimeError("rollback on other")
    assert r.llen("queue:default") == 0


def test_a_push_that_fails_at_commit_is_retried_until_redis_is_back(
    wurk: Wurk, r: Any, test_config: Config, redis_url: str
) -> None:
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS))
    with transaction.atomic():
        jid = jobs.echo.perform_async("survives")
    # The commit itself succeeded; the push waits in the background for Redis.
    wurk.configure(test_config)
    wait_for(lambda: queued_jids(wurk.redis) == [jid], timeout=20)


def test_giving_up_is_logged_and_signalled(
    wurk: Wurk,
    test_config: Config,
    use_app_settings: Callable[..., Settings],
    caplog: pytest.LogCaptureFixture,
) -> None:
    use_app_settings(push_retries=1)
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    failures: list[dict[str, Any]] = []
    done = threading.Event()

    def receiver(sender: Any, **kwargs: Any) -> None:
        failures.append(kwargs)
        done.set()

    push_failed.connect(receiver)
    try:
        with transaction.atomic():
            jid = jobs.echo.perform_async("doomed")
        assert done.wait(20)
    finally:
        push_failed.disconnect(receiver)
    [failure] = failures
    assert [p["jid"] for p in failure["payloads"]] == [jid] and failure["at"] is None
    assert failure["error"] is not None
    assert jid in caplog.text and "gave up pushing 1 committed job(s)" in caplog.text


# Outbox ------------------------------------------------------------------------------


@pytest.fixture
def outbox(wurk: Wurk, use_app_settings: Callable[..., Settings]) -> Wurk:
    use_app_settings(enqueue="outbox")
    return wurk


def test_outbox_commit_pushes_and_deletes_the_row(outbox: Wurk) -> None:
    r = outbox.redis
    with transaction.atomic():
        jid = jobs.echo.perform_async("via outbox")
        scheduled = jobs.echo.perform_in(3600, "later")
        assert OutboxEntry.objects.count() == 2 and r.llen("queue:default") == 0
    assert queued_jids(r) == [jid]
    assert json.loads(r.zrange("schedule", 0, -1)[0])["jid"] == scheduled
    assert "enqueued_at" not in json.loads(r.zrange("schedule", 0, -1)[0])
    assert OutboxEntry.objects.count() == 0


def test_outbox_rollback_leaves_no_row_and_no_job(outbox: Wurk) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.echo.perform_async("never")
        raise RuntimeError("rollback")
    assert OutboxEntry.objects.count() == 0 and outbox.redis.llen("queue:default") == 0


def test_outbox_rows_wait_out_a_redis_outage_for_the_relay(outbox: Wurk, test_config: Config) -> None:
    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic():
        jids = [jobs.echo.perform_async(i) for i in range(5)]
    assert OutboxEntry.objects.count() == 5  # committed with the data, waiting
    outbox.configure(test_config)
    assert relay_once(outbox, "default") == 5
    assert queued_jids(outbox.redis) == jids  # in order
    assert OutboxEntry.objects.count() == 0
    assert relay_once(outbox, "default") == 0


def test_two_relays_racing_push_each_row_exactly_once(outbox: Wurk, test_config: Config) -> None:
    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic():
        jids = [jobs.echo.perform_async(i) for i in range(200)]
    outbox.configure(test_config)
    from django_wurk.outbox import push_rows

    # Two relays that both read all rows (as if the lease had expired between them).
    rows = list(OutboxEntry.objects.order_by("pk"))
    results: list[int] = []

    def relay() -> None:
        try:
            results.append(push_rows(outbox, "default", rows))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=relay) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 200
    pushed = queued_jids(outbox.redis)
    assert sorted(pushed) == sorted(jids) and len(pushed) == 200
    # A relay whose delete lost a race (SQLite locks the table) leaves rows; the next pass
    # finds their markers, pushes nothing and deletes them.
    assert relay_once(outbox, "default") == 0
    assert OutboxEntry.objects.count() == 0 and len(queued_jids(outbox.redis)) == 200


def test_a_process_killed_between_commit_and_push_loses_nothing(
    outbox: Wurk, redis_url: str, tmp_path: Path
) -> None:
    """The outbox row is committed with the data; the relay delivers it after the crash."""
    # The child processes share a real database: a file for SQLite, else this test database.
    db = connections["default"].settings_dict
    if connections["default"].vendor == "sqlite":
        db_url = f"sqlite:///{tmp_path / 'crash.sqlite3'}"
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        db_url = f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    script = """
import os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
django.setup()
from django.core.management import call_command
from django.db import transaction
call_command("migrate", "django_wurk", verbosity=0)
from tests.jobsapp import jobs
with transaction.atomic():
    transaction.on_commit(lambda: os._exit(9))  # dies after the commit, before our push runs
    print(jobs.echo.perform_async("crash-proof"), flush=True)
"""
    env = dict(os.environ, DATABASE_URL=db_url, WURK_REDIS_URL=redis_url, WURK_ENQUEUE="outbox",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))  # fmt: skip
    env.pop("WURK_TEST_REDIS_URL", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    assert len(proc.stdout.strip()) == 24  # the jid was returned before the crash
    assert outbox.redis.llen("queue:default") == 0

    # A worker's outbox relay finds the row and the worker runs the job.
    env["WURK_OUTBOX_RELAY_INTERVAL"] = "0.2"
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "runwurk", "-c", "1"],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: outbox.redis.lrange("seen:echo", 0, -1) == [b'["crash-proof"]'], timeout=30)
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "outbox relay pushed 1 job(s) left behind in database 'default'" in err


def test_with_no_retries_the_original_error_is_reported(
    wurk: Wurk, test_config: Config, use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(push_retries=0)
    wurk.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    failures: list[dict[str, Any]] = []
    done = threading.Event()

    def receiver(sender: Any, **kwargs: Any) -> None:
        failures.append(kwargs)
        done.set()

    push_failed.connect(receiver)
    try:
        with transaction.atomic():
            jobs.echo.perform_async("no retries")
        assert done.wait(20)
    finally:
        push_failed.disconnect(receiver)
    assert "127.0.0.1:1" in str(failures[0]["error"])  # the push's own error, not None


def test_the_relay_covers_every_database(outbox: Wurk, test_config: Config) -> None:
    from django_wurk.outbox import Relay

    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic(using="other"):
        on_other = jobs.echo.set(using="other").perform_async("other db")
    with transaction.atomic():
        on_default = jobs.echo.perform_async("default db")
    outbox.configure(test_config)
    assert Relay(outbox, ["default", "other"]).relay_all() == 2
    assert sorted(queued_jids(outbox.redis)) == sorted([on_other, on_default])


# A process that exits while on-commit pushes are still waiting ------------------------

EXIT_SCRIPT = """
import atexit, json, logging, os, sys, time
atexit.register(lambda: print("exited", time.monotonic(), flush=True))  # runs last (LIFO)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
import django
django.setup()
from django.db import transaction
from django_wurk import transaction as wurk_transaction, wurk
from django_wurk.signals import push_failed
from tests.jobsapp import jobs

def receiver(sender, payloads, at, error, **kwargs):
    print("push_failed", json.dumps({"jids": [p["jid"] for p in payloads], "at": at, "error": str(error)}),
          flush=True)

push_failed.connect(receiver)
wurk_transaction.EXIT_FLUSH_SECONDS = float(os.environ.get("EXIT_FLUSH_SECONDS", "10"))
with transaction.atomic():
    print("jid", jobs.echo.perform_async("committed"), flush=True)
with transaction.atomic():
    print("jid", jobs.critical.perform_in(3600, "later"), flush=True)
if os.environ.get("REDIS_AT_EXIT"):
    wurk.configure(wurk.config.replace(redis_url=os.environ["REDIS_AT_EXIT"]))
print("exiting", time.monotonic(), flush=True)
"""


def run_and_exit(redis_url: str, **env_vars: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run EXIT_SCRIPT: two jobs committed while Redis is down, then a normal exit."""
    env = dict(os.environ, WURK_REDIS_URL=redis_url, WURK_REDIS_SOCKET_TIMEOUT="0.5",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]), **env_vars)  # fmt: skip
    env.pop("WURK_TEST_REDIS_URL", None)
    env.pop("DATABASE_URL", None)  # SQLite in memory: no table is needed
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    jids = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("jid ")]
    assert len(jids) == 2
    return proc, jids


def test_jobs_still_unpushed_at_exit_are_logged_at_error_and_signalled() -> None:
    proc, (now, later) = run_and_exit(DEAD_REDIS)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR django_wurk.transaction")]
    assert len(errors) == 2, proc.stderr
    assert now in errors[0] and "tests.jobsapp.jobs.echo" in errors[0] and "queue default" in errors[0]
    assert later in errors[1] and "tests.jobsapp.jobs.critical" in errors[1] and "queue critical" in errors[1]
    assert all("the process is exiting" in line for line in errors)
    signals = [
        json.loads(line.split(" ", 1)[1])
        for line in proc.stdout.splitlines()
        if line.startswith("push_failed")
    ]
    assert [s["jids"] for s in signals] == [[now], [later]]
    assert signals[0]["at"] is None and signals[1]["at"] > 0
    assert all("127.0.0.1:1" in s["error"] for s in signals)  # the push's own error


def test_jobs_waiting_at_exit_are_pushed_if_redis_is_back(wurk: Wurk, redis_url: str) -> None:
    proc, (now, later) = run_and_exit(DEAD_REDIS, REDIS_AT_EXIT=redis_url)
    assert queued_jids(wurk.redis) == [now]
    assert [json.loads(m)["jid"] for m in wurk.redis.zrange("schedule", 0, -1)] == [later]
    assert "ERROR" not in proc.stderr and "push_failed" not in proc.stdout


def test_the_wait_at_exit_is_bounded_when_redis_does_not_answer() -> None:
    """A Redis that accepts connections and never replies must not hold the exit hostage."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections complete in the backlog; nothing ever answers
    try:
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        proc, jids = run_and_exit(
            DEAD_REDIS, REDIS_AT_EXIT=url, EXIT_FLUSH_SECONDS="1", WURK_FETCH_TIMEOUT="10"
        )
    finally:
        silent.close()
    stamps = {line.split()[0]: float(line.split()[1]) for line in proc.stdout.splitlines() if "exit" in line}
    # One push to the silent server takes 10.5 s or more (the socket timeout): an exit that
    # waited for even one would take longer than this; the bound is 1 s.
    assert stamps["exited"] - stamps["exiting"] < 8, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR django_wurk.transaction")]
    assert len(errors) == 2 and all(jid in "".join(errors) for jid in jids), proc.stderr
    assert proc.stdout.count("push_failed") == 2


FORK_SCRIPT = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django
django.setup()
from django.db import transaction
from django_wurk import wurk
from tests.jobsapp import jobs

dead, live = wurk.config, wurk.config.replace(redis_url=os.environ["LIVE_REDIS"])
with transaction.atomic():
    jobs.echo.perform_async("parent")  # fails: waits in the parent's retrier
pid = os.fork()
if pid == 0:  # a forked web worker, which has its own commit fail, then exits normally
    with transaction.atomic():
        jobs.echo.perform_async("child")
    wurk.configure(live)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
wurk.configure(live)
"""


def test_a_forked_child_never_pushes_what_its_parent_was_retrying(wurk: Wurk, redis_url: str) -> None:
    env = dict(os.environ, WURK_REDIS_URL=DEAD_REDIS, LIVE_REDIS=redis_url, WURK_REDIS_SOCKET_TIMEOUT="0.5",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))  # fmt: skip
    env.pop("WURK_TEST_REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    seen = sorted(json.loads(x)["args"][0] for x in wurk.redis.lrange("queue:default", 0, -1))
    assert seen == ["child", "parent"], proc.stderr  # each pushed at its own process's exit, once
