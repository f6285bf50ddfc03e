"""A Celery task's job in the dashboard: a UUID task id as jid, its kwargs readable, actions working."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from django_wurk.api import DeadSet
from django_wurk.core.worker import Launcher
from tests.celery import celery_style_tasks as tasks
from tests.conftest import wait_for
from tests.dashboard.conftest import url

# Outside a test transaction: inside one, every push would wait for a commit that never comes.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def manager(admin_client: Client, celery_workers: Launcher) -> Client:
    return admin_client


def test_a_failed_celery_task_is_readable_and_retryable_by_its_uuid(manager: Client, r: Any) -> None:
    task_id = str(uuid.uuid4())
    tasks.boom.apply_async(("<b>kaput</b>",), {}, task_id=task_id)
    tasks.record.apply_async(("k",), {"value": {"when": "<i>x</i>"}}, task_id=f"{task_id}-2", countdown=600)
    [dead] = wait_for(lambda: list(DeadSet()))
    assert dead.jid == task_id

    listing = manager.get(url("dead")).content.decode()
    assert task_id in listing and "tests.celery.celery_style_tasks.boom" in listing
    assert "&lt;b&gt;kaput&lt;/b&gt;" in listing and "<b>kaput</b>" not in listing
    scheduled = manager.get(url("scheduled")).content.decode()
    assert "value={&quot;when&quot;: &quot;&lt;i&gt;x&lt;/i&gt;&quot;}" in scheduled  # kwargs, escaped

    page = manager.get(url("entry", kind="dead", key=dead.key))
    assert page.status_code == 200 and task_id in page.content.decode()
    response = manager.post(url("bulk", kind="dead"), {"key": dead.key, "action": "retry"})
    assert response.status_code == 302
    # It ran again and failed again (Sidekiq lowers retry_count on a manual retry, the failure raises it).
    wait_for(lambda: r.zcard("dead") == 1 and next(iter(DeadSet())).get("retried_at"))
    assert next(iter(DeadSet())).jid == task_id
