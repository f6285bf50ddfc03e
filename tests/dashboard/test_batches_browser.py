"""A batch's progress page in a real browser (Debian's Chromium, as in ``test_browser.py``):
the bar and the counts follow a running worker until the batch succeeds."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from django_wurk import Batch, Wurk
from django_wurk.core.worker import Launcher
from tests.conftest import tail
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    BASE,
    XSS,
    browser,
    browser_ok,
    operator,
    shots,
    start_worker,
)
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, tail]  # tail: CI's pass 1 only


def test_the_progress_page_follows_a_batch_to_its_success(
    browser: Page,  # noqa: F811 - the fixtures imported above
    wurk: Wurk,
    r: Any,
    start_worker: Callable[..., Launcher],  # noqa: F811
    shots: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = browser
    batch = Batch(description=f"Order import {XSS}")
    batch.on("complete", Recorder, {"mail": "ops@example.com"})
    batch.on("success", Recorder)
    with batch.jobs():
        for i in range(40):
            batch_jobs.work.perform_async(i, 0.05)
    # From the tab, by search, to the batch's page.
    page.goto(BASE)
    page.locator(".wurk-tabs").get_by_role("link", name=re.compile("^Batches")).click()
    expect(page.locator("#wurk-batches")).to_contain_text("Order import <script>")
    page.fill("input[name=q]", "order import")
    page.click(".wurk-search button")
    page.get_by_role("link", name=batch.bid).click()
    expect(page.locator("h1")).to_have_text(f"Batch {batch.bid}")
    root = page.locator("#wurk-batch")
    expect(root.locator('[data-stat="total"]')).to_have_text("40")
    expect(root.locator('[data-stat="pending"]')).to_have_text("40")
    expect(root.locator('[data-count="done_percent"]')).to_have_text("0")
    expect(root.locator("[data-state]")).to_have_text("pending")
    shots(page, "batch-pending")

    start_worker()
    # The page polls the status JSON every second: no reload.
    expect(root.locator("[data-state]")).to_have_text("succeeded", timeout=30_000)
    expect(root.locator('[data-count="done_percent"]')).to_have_text("100")
    expect(root.locator('[data-stat="pending"]')).to_have_text("0")
    expect(root.locator('[data-count="wurk-bar-succeeded"]')).to_have_text("40")
    bar = root.locator(".wurk-progress")
    succeeded = bar.locator('[data-part="wurk-bar-succeeded"]')
    assert succeeded.evaluate("e => parseFloat(e.style.width)") == 100
    page.wait_for_timeout(500)  # the width's transition
    assert abs(succeeded.bounding_box()["width"] - bar.bounding_box()["width"]) <= 3  # type: ignore[index]
    shots(page, "batch-succeeded")

    page.reload()
    callbacks = page.locator("#wurk-batch-callbacks")
    expect(callbacks).to_contain_text("ops@example.com")
    expect(callbacks.locator(".wurk-badge-ok")).to_have_count(2)  # both fired
    assert page.evaluate("window.__xss") is None  # the description was shown as text
    page.emulate_media(color_scheme="dark")
    shots(page, "batch-succeeded-dark")


def test_a_death_shows_on_the_bar_and_links_to_the_dead_job(
    browser: Page,  # noqa: F811 - the fixtures imported above
    wurk: Wurk,
    r: Any,
    start_worker: Callable[..., Launcher],  # noqa: F811
    shots: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = browser
    batch = Batch(description="with a death")
    with batch.jobs():
        batch_jobs.work.perform_async(1)
        jid = batch_jobs.dies.perform_async(2)
    start_worker()
    page.goto(f"{BASE}batches/{batch.bid}/")
    root = page.locator("#wurk-batch")
    expect(root.locator("[data-state]")).to_have_text(re.compile("complete\\s+death"), timeout=30_000)
    expect(root.locator('[data-count="wurk-bar-dead"]')).to_have_text("1")
    expect(root.locator('[data-count="done_percent"]')).to_have_text("100")
    page.reload()
    shots(page, "batch-death")
    page.locator("#wurk-batch-dead").get_by_role("link", name=str(jid)).click()
    expect(page.locator("#content")).to_contain_text("in the dead set")
    expect(page.locator("#content")).to_contain_text("dies 2")
