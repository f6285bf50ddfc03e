"""The Periodic tab in a real browser (Debian's Chromium, as in ``test_browser.py``), with a
real worker leading: its loops appear, a pause shows, enqueue now names the jid, the worker
runs that job, and the history links the jid."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest

from django_wurk import Wurk
from django_wurk.api import LoopSet, current_leader
from django_wurk.core.features.periodic import LoopSpec, features, keys
from django_wurk.core.features.periodic.cron import Cron
from django_wurk.core.worker import Launcher
from tests.conftest import tail, wait_for
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    BASE,
    XSS,
    browser,
    browser_ok,
    operator,
    shots,
    start_worker,
)
from tests.jobsapp import jobs

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, tail]  # tail: CI's pass 1 only


def test_pause_and_enqueue_a_loop_from_the_periodic_tab(
    browser: Page,  # noqa: F811 - the fixtures imported above
    wurk: Wurk,
    r: Any,
    start_worker: Callable[..., Launcher],  # noqa: F811
    shots: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = browser
    # Once a year: nothing fires by itself while the test runs; only "enqueue now" pushes.
    yearly = Cron.parse("0 9 1 1 *")
    nightly = LoopSpec(yearly, jobs.echo.job_class, args=("from the loop",), tz=ZoneInfo("Europe/Berlin"))
    hostile = LoopSpec(Cron.parse("@monthly"), jobs.echo.job_class, args=(XSS,), queue="low")
    wurk.use(*features([nightly, hostile], ttl=5))

    # No worker yet: nobody leads, nothing is registered.
    page.goto(BASE)
    page.locator(".wurk-tabs").get_by_role("link", name="Periodic").click()
    expect(page.locator("h1")).to_have_text("Periodic")
    expect(page.locator("#wurk-leader")).to_contain_text("no leader")
    expect(page.locator("#content")).to_contain_text("No periodic loops are registered.")
    shots(page, "periodic-no-leader")

    worker = start_worker(run=True)
    wait_for(lambda: current_leader(wurk) == worker.identity and len(LoopSet(wurk)) == 2, timeout=15)
    page.reload()
    expect(page.locator("#wurk-leader [data-leader]")).to_have_text(worker.identity)
    row = page.locator(f'tr[data-lid="{nightly.lid}"]')
    expect(row).to_contain_text("0 9 1 1 *")
    expect(row).to_contain_text("Europe/Berlin")
    expect(row.locator("[data-paused]")).to_have_text("no")
    expect(page.locator(f'tr[data-lid="{hostile.lid}"]')).to_contain_text(XSS)  # shown as text
    shots(page, "periodic")

    row.get_by_role("button", name="Pause").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Paused loop {nightly.lid}")
    expect(row.locator("[data-paused]")).to_have_text("paused")
    assert r.hget(keys.loop(nightly.lid), "paused") == b"1"
    shots(page, "periodic-paused")

    row.get_by_role("button", name="Enqueue now").click()
    message = page.locator(".messagelist")
    expect(message).to_contain_text(f"Enqueued loop {nightly.lid}")
    found = re.search(r"now: job ([0-9a-f]{24}) is on queue", message.inner_text())
    assert found, message.inner_text()
    jid = found.group(1)
    shots(page, "periodic-enqueued")
    # The worker runs it (a paused loop still enqueues on demand); nothing else fired.
    wait_for(lambda: r.llen("seen:echo") == 1)
    assert r.hget(keys.loop(nightly.lid), "paused") == b"1"

    # Its page: the options, and the jid in the history.
    row.get_by_role("link", name=nightly.lid).click()
    expect(page.locator("h1")).to_have_text(f"Loop {nightly.lid}")
    expect(page.locator("#wurk-loop-fields")).to_contain_text("from the loop")
    expect(page.locator("#wurk-loop-fields")).to_contain_text("CET")  # the next fire on the loop's clock
    history = page.locator("#wurk-loop-history")
    expect(history.get_by_role("link", name=jid)).to_have_count(1)
    shots(page, "loop")
    page.get_by_role("button", name="Unpause").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Unpaused loop {nightly.lid}")
    expect(page.get_by_role("button", name="Pause")).to_have_count(1)
    history.get_by_role("link", name=jid).click()
    expect(page.locator(".messagelist")).to_contain_text(f"Job {jid} is not waiting, running")
    assert page.evaluate("window.__xss") is None
    page.emulate_media(color_scheme="dark")
    page.goto(BASE + "periodic/")
    shots(page, "periodic-dark")
    assert page.evaluate("window.__xss") is None
