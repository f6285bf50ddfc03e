"""The outbox's exactly-once marker: an identity per row that a reused id cannot fake.

Row ids come back after ``manage.py flush``, ``TRUNCATE ... RESTART IDENTITY``, a restore,
or in a second project sharing the Redis; a marker keyed by the id would then swallow the
new row's job. These run on SQLite and, with ``DATABASE_URL`` set, on PostgreSQL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from django_wurk import Config, Wurk
from django_wurk.conf import Settings
from django_wurk.core import keys
from django_wurk.models import OutboxEntry
from django_wurk.outbox import relay_once, scope
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def outbox(wurk: Wurk, use_app_settings: Callable[..., Settings]) -> Wurk:
    use_app_settings(enqueue="outbox")
    return wurk


def queued_jids(r: Any, queue: str = "default") -> list[str]:
    return [json.loads(x)["jid"] for x in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def stranded_row(outbox: Wurk, test_config: Config, *args: Any) -> tuple[str, OutboxEntry]:
    """Commit one outbox row while Redis is unreachable, so it stays for the relay."""
    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic():
        jid = jobs.echo.perform_async(*args)
    outbox.configure(test_config)
    return jid, OutboxEntry.objects.get()


def test_a_reused_row_id_is_still_pushed(outbox: Wurk, caplog: pytest.LogCaptureFixture) -> None:
    """``manage.py flush`` restarts the ids; the next row's job must not meet the old marker."""
    # Resets every table and its sequence (SQLite's sqlite_sequence, PostgreSQL's
    # RESTART IDENTITY), as a restore or a second project with the same NAME would.
    call_command("flush", interactive=False, verbosity=0)
    with transaction.atomic():
        first = jobs.echo.perform_async("before the flush")
        first_id = OutboxEntry.objects.get().pk
    assert queued_jids(outbox.redis) == [first] and OutboxEntry.objects.count() == 0

    call_command("flush", interactive=False, verbosity=0)

    with caplog.at_level(logging.INFO, logger="django_wurk.outbox"), transaction.atomic():
        second = jobs.echo.perform_async("after the flush")
        assert OutboxEntry.objects.get().pk == first_id  # the id came back: the case at hand
    assert queued_jids(outbox.redis) == [first, second]
    assert OutboxEntry.objects.count() == 0
    assert "pushed before" not in caplog.text


def test_every_row_gets_its_own_random_token(outbox: Wurk, test_config: Config) -> None:
    outbox.configure(test_config.replace(redis_url=DEAD_REDIS, redis_socket_timeout=0.5))
    with transaction.atomic():
        jobs.echo.perform_bulk([(i,) for i in range(50)])
        jobs.echo.perform_async("one more")
    tokens = list(OutboxEntry.objects.values_list("token", flat=True))
    assert len(tokens) == 51 and len(set(tokens)) == 51
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)  # 128 random bits, hex


def test_a_row_whose_marker_exists_is_logged_not_dropped_silently(
    outbox: Wurk, test_config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    """A relay that crashed between push and delete: the row goes, once, with a WARNING."""
    jid, row = stranded_row(outbox, test_config, "pushed already")
    marker = keys.outbox_marker(scope("default"), row.token)
    outbox.redis.set(marker, jid)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="django_wurk.outbox"):
        assert relay_once(outbox, "default") == 0
    assert OutboxEntry.objects.count() == 0 and outbox.redis.llen("queue:default") == 0
    [record] = [r for r in caplog.records if r.name == "django_wurk.outbox"]
    assert record.levelno == logging.WARNING
    assert row.token in record.getMessage() and jid in record.getMessage()


def test_the_marker_is_keyed_by_the_token_not_the_id(outbox: Wurk, test_config: Config) -> None:
    jid, row = stranded_row(outbox, test_config, "by token")
    # What an earlier row with this id (before a flush) left behind: no effect any more.
    outbox.redis.set(f"wurk-outbox:{scope('default')}:{row.pk}", "1")
    assert relay_once(outbox, "default") == 1
    assert queued_jids(outbox.redis) == [jid]
    assert outbox.redis.exists(keys.outbox_marker(scope("default"), row.token))


def test_the_migration_gives_rows_already_waiting_distinct_tokens(outbox: Wurk) -> None:
    """Rows written by the previous version keep their old marker (their id), so a row that
    was pushed but not yet deleted before the upgrade is not pushed a second time."""
    executor = MigrationExecutor(connection)
    before = [("django_wurk", "0002_dashboard")]
    after = executor.loader.graph.leaf_nodes("django_wurk")
    executor.migrate(before)
    try:
        with connection.cursor() as cursor:
            for n in range(3):
                payload = json.dumps({"class": "tests.jobsapp.jobs.echo", "args": [n], "jid": f"{n:024d}"})
                cursor.execute(
                    "INSERT INTO django_wurk_outbox (payload, at, created_at) VALUES (%s, NULL, %s)",
                    [payload, "2026-01-01 00:00:00+00:00"],
                )
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    rows = list(OutboxEntry.objects.order_by("pk"))
    assert [row.token for row in rows] == [str(row.pk) for row in rows]
    # One of them was pushed by the old version just before the upgrade (its marker is the id).
    outbox.redis.set(f"wurk-outbox:{scope('default')}:{rows[0].pk}", "1")
    assert relay_once(outbox, "default") == 2
    queued = reversed(outbox.redis.lrange("queue:default", 0, -1))
    assert [json.loads(x)["args"] for x in queued] == [[1], [2]]  # rows[0] not a second time
