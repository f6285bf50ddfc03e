"""The dashboard never shows an encrypted argument: not its value, not its envelope.

Jobs are sealed by the real client middleware and run by a real worker, so the pages are
tested against what Redis really holds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from django_wurk import Job, Wurk
from django_wurk.core import keys
from django_wurk.core.features.encryption.settings import EncryptionSettings
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.dashboard.conftest import url

SECRET = "dashboard-secret-4111"
KEY = bytes(range(32))
release = threading.Event()


class HeldSecret(Job):
    """Runs until released, so the busy page shows it while it holds the plaintext."""

    wire_name = "enc.HeldSecret"
    options = {"encrypt": True}

    def perform(self, order: int, bag: dict[str, Any]) -> None:
        assert bag == {"card": SECRET}
        release.wait(10)


# Registered only inside these tests: `manage.py check` elsewhere must not find an
# encrypt=True job in a configuration without keys.
registry.unregister(HeldSecret.wire_name)


@pytest.fixture
def sealing(wurk: Wurk, use_app_settings: Any) -> Iterator[Wurk]:
    use_app_settings(enqueue="immediate")  # the test runs inside a transaction that never commits
    wurk.configure(
        wurk.config.replace(concurrency=2).with_section(EncryptionSettings(encryption_keys=(("1", KEY),)))
    )
    registry.register(HeldSecret)
    try:
        yield wurk
    finally:
        registry.unregister(HeldSecret.wire_name)


def page(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def assert_hidden(html: str, envelope: dict[str, Any]) -> None:
    assert SECRET not in html
    assert envelope["ct"] not in html and envelope["iv"] not in html


def test_queue_retry_and_entry_pages_mask_the_encrypted_argument(
    viewer: Client, sealing: Wurk, r: Any
) -> None:
    HeldSecret.perform_async(1234, {"card": SECRET})
    [raw] = r.lrange("queue:default", 0, -1)
    stored = json.loads(raw)
    envelope = stored["args"][-1]
    html = page(viewer, url("queue", name="default"))
    assert "1234" in html and "[encrypted data]" in html
    assert_hidden(html, envelope)

    failed = {
        **stored,
        "error_class": "ValueError",
        "error_message": "[hidden]",
        "failed_at": 1.0,
        "retry_count": 0,
    }
    r.zadd(keys.RETRY, {json.dumps(failed): 2_000_000_000.0})
    html = page(viewer, url("retries"))
    assert "[encrypted data]" in html
    assert_hidden(html, envelope)
    html = page(viewer, url("entry", kind="retries", key=f"{2_000_000_000.0!r}-{stored['jid']}"))
    assert "[encrypted data]" in html and "encrypted" in html
    assert_hidden(html, envelope)


def test_busy_page_and_redis_hold_no_plaintext_while_the_job_runs(
    viewer: Client, sealing: Wurk, r: Any
) -> None:
    HeldSecret.perform_async(99, {"card": SECRET})
    envelope = json.loads(r.lrange("queue:default", 0, -1)[0])["args"][-1]
    worker = Launcher(sealing)
    worker.start()
    try:
        wait_for(lambda: "[encrypted data]" in page(viewer, url("busy")))
        html = page(viewer, url("busy"))
        assert "99" in html
        assert_hidden(html, envelope)
        for name in r.scan_iter(match="*:work"):
            for value in r.hgetall(name).values():
                assert SECRET.encode() not in value
    finally:
        release.set()
        worker.stop()
        release.clear()
