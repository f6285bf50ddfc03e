"""The dashboard's shard switcher: every page and action runs against the chosen shard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.test import Client

from django_wurk import Job, Wurk
from tests.dashboard.conftest import url


class Report(Job):
    wire_name = "tests.dashboard.shards.Report"
    queue = "reports"

    def perform(self) -> None:
        pass


def test_the_switcher_picks_the_shard_every_page_and_action_uses(
    login: Callable[..., Client], wurk: Wurk, r: Any, sharded: Any
) -> None:
    manager = login("view", "manage")
    Report.set(shard="bulk", on_commit=False).perform_async()
    Report.set(queue="mail", on_commit=False).perform_async()

    page = manager.get(url("queues")).content.decode()
    assert 'aria-label="Shards"' in page and '<strong aria-current="true">default</strong>' in page
    assert 'href="?shard=bulk"' in page
    assert 'data-queue="mail"' in page and 'data-queue="reports"' not in page

    page = manager.get(url("queues") + "?shard=bulk").content.decode()
    assert 'data-queue="reports"' in page and 'data-queue="mail"' not in page
    assert '<strong aria-current="true">bulk</strong>' in page
    # The session keeps the choice: the next page, and an action's POST, stay on bulk.
    assert 'data-queue="reports"' in manager.get(url("queues")).content.decode()
    manager.post(url("queue_pause"), {"name": "reports"})
    assert sharded.smembers("paused") == {b"reports"} and not r.smembers("paused")

    page = manager.get(url("queues") + "?shard=default").content.decode()
    assert 'data-queue="mail"' in page
    manager.post(url("queue_pause"), {"name": "mail"})
    assert r.smembers("paused") == {b"mail"} and sharded.smembers("paused") == {b"reports"}

    missing = manager.get(url("queues") + "?shard=nope")
    assert missing.status_code == 404 and "no shard is named" in missing.content.decode()


def test_one_shard_shows_no_switcher(login: Callable[..., Client], wurk: Wurk) -> None:
    page = login("view").get(url("queues")).content.decode()
    assert 'aria-label="Shards"' not in page


def test_monitoring_reads_each_shards_stats_by_name(
    client: Client, wurk: Wurk, r: Any, sharded: Any, use_app_settings: Callable[..., Any]
) -> None:
    token = "monitoring-token-0123456789"
    use_app_settings(dashboard_stats_token=token)
    r.set("stat:processed", 7)
    sharded.set("stat:processed", 11)
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get(url("stats"), headers=auth).json()["sidekiq"]["processed"] == 7
    assert client.get(url("stats") + "?shard=bulk", headers=auth).json()["sidekiq"]["processed"] == 11
    missing = client.get(url("stats") + "?shard=nope", headers=auth)
    assert missing.status_code == 404 and missing.json()["error"] == "unknown_shard"
