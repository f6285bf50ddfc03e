"""The dashboard in a real browser: Debian's Chromium driven by Playwright, against a live server.

A browser is never downloaded: Playwright launches ``/usr/bin/chromium``
(``apt-get install chromium``). Without it (or without the ``playwright`` package) these
tests are skipped with the reason; with ``WURK_REQUIRE_BROWSER=1`` (set by ``.ci/run``) they
fail instead. Screenshots of every page are saved under ``test-output/dashboard/``.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import User

from django_wurk import Config, Wurk
from django_wurk.conf import Settings
from django_wurk.core import keys, wire
from django_wurk.core.worker import Launcher
from tests.conftest import tail, wait_for
from tests.dashboard.conftest import add_process, failed, make_user, payload, push, write_metrics, zadd
from tests.jobsapp import jobs

if TYPE_CHECKING:
    from playwright.sync_api import Page

#: Debian's Chromium; WURK_CHROMIUM names another system Chromium binary.
CHROMIUM = os.environ.get("WURK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "dashboard"
BASE = "/admin/django_wurk/dashboard/"
XSS = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=2">'

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, tail]  # tail: CI's pass 1 only


def browser_problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; it drives the system Chromium)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set WURK_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def browser_ok() -> None:
    problem = browser_problem()
    if problem is None:
        return
    if os.environ.get("WURK_REQUIRE_BROWSER") == "1":
        pytest.fail(f"WURK_REQUIRE_BROWSER=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture
def operator(transactional_db: None) -> User:
    """A staff user with both dashboard permissions (created before the browser starts:
    Django refuses ORM calls while Playwright's event loop runs in this thread)."""
    return make_user("operator", "view", "manage")


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Callable[[Page, str], None]:
    """``shots(page, "name")`` saves a full-page screenshot as ``test-output/dashboard/<test>/NN-name.png``."""
    outdir = OUTPUT / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir(parents=True, exist_ok=True)
    count = iter(range(1, 100))

    def shot(page: Page, name: str) -> None:
        page.screenshot(path=str(outdir / f"{next(count):02d}-{name}.png"), full_page=True)

    return shot


@pytest.fixture
def browser(browser_ok: None, operator: User, wurk: Wurk, live_server: Any, tmp_path: Path) -> Iterator[Page]:
    """A fresh Chromium profile per test, logged in as ``operator`` through the admin login form."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 860},
            base_url=live_server.url,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(15_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto("/admin/")
            page.fill("#id_username", "operator")
            page.fill("#id_password", "pw-operator")
            page.click("input[type=submit]")
            page.wait_for_selector("#user-tools")
            yield page
            assert not errors, f"JavaScript errors: {errors}"
        finally:
            context.close()


@pytest.fixture
def start_worker(wurk: Wurk) -> Iterator[Callable[..., Launcher]]:
    """In-process workers; ``start_worker(run=True)`` runs one in a thread, so signals sent
    through Redis (quiet, stop) are acted on as in ``runwurk``."""
    started: list[tuple[Launcher, threading.Thread | None]] = []

    def start(run: bool = False) -> Launcher:
        worker = Launcher(wurk)
        if run:
            thread = threading.Thread(target=worker.run, kwargs={"handle_os_signals": False}, daemon=True)
            thread.start()
            started.append((worker, thread))
            wait_for(lambda: wurk.redis.sismember(keys.PROCESSES, worker.identity))
        else:
            worker.start()
            started.append((worker, None))
        return worker

    yield start
    jobs.release.set()
    try:
        for worker, thread in started:
            if thread is None:
                worker.stop()
            else:
                worker.signal("TERM")
                thread.join(15)
    finally:
        jobs.release.clear()


def stat(page: Page, name: str) -> int:
    return int(page.locator(f'.wurk-card [data-stat="{name}"]').inner_text().replace(",", ""))


def test_login_shows_wurk_in_the_admin_and_numbers_follow_a_running_worker(
    browser: Page, wurk: Wurk, r: Any, start_worker: Callable[..., Launcher], shots: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    expect(page.locator("#content-main")).to_contain_text("Wurk")
    shots(page, "admin-index")
    page.get_by_role("link", name="Dashboard").first.click()
    expect(page.locator("h1")).to_have_text("Dashboard")
    assert stat(page, "processed") == 0
    page.select_option("#wurk-poll-interval", "1")

    for i in range(20):
        jobs.echo.perform_async(i)
    for i in range(3):
        jobs.dies_at_once.perform_async(i)
    expect(page.locator('.wurk-card [data-stat="enqueued"]')).to_have_text("23")
    start_worker()
    # Stats reach Redis with each heartbeat; the page polls them every second.
    expect(page.locator('.wurk-card [data-stat="processed"]')).to_have_text("23", timeout=20_000)
    expect(page.locator('.wurk-card [data-stat="failed"]')).to_have_text("3")
    expect(page.locator('.wurk-card [data-stat="dead"]')).to_have_text("3")
    expect(page.locator('.wurk-tabs [data-stat="dead"]')).to_have_text("3")  # the tab's count follows too
    expect(page.locator('.wurk-card [data-stat="enqueued"]')).to_have_text("0")
    expect(page.locator('.wurk-card [data-stat="processes"]')).to_have_text("1")
    # The live graph drew the burst: a processed line whose peak is above the baseline.
    expect(page.locator("#wurk-live-chart polyline.wurk-processed")).to_have_count(1, timeout=5_000)
    page.wait_for_timeout(1500)
    shots(page, "dashboard-live")
    page.emulate_media(color_scheme="dark")
    shots(page, "dashboard-live-dark")


def test_retry_a_dead_job_from_its_page(
    browser: Page, wurk: Wurk, r: Any, start_worker: Callable[..., Launcher], shots: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    job = failed("tests.jobsapp.jobs.echo", args=["back from the dead"], retry_count=25)
    zadd(r, keys.DEAD, job, time.time() - 30)
    page.goto(BASE)
    page.locator(".wurk-tabs").get_by_role("link", name=re.compile("^Dead")).click()
    expect(page.locator("#wurk-entries")).to_contain_text("back from the dead")
    shots(page, "dead-list")
    page.locator("#wurk-entries").get_by_role("link", name="tests.jobsapp.jobs.echo").click()
    expect(page.locator("#wurk-backtrace")).to_contain_text("app/jobs.py:12:in `perform'")
    shots(page, "dead-entry")
    page.get_by_role("button", name="Retry now").click()
    expect(page.locator(".messagelist")).to_contain_text("1 job retried")
    assert r.zcard(keys.DEAD) == 0
    [raw] = r.lrange(keys.queue("default"), 0, -1)
    assert wire.loads(raw)["jid"] == job["jid"] and wire.loads(raw)["retry_count"] == 24
    shots(page, "dead-after-retry")
    start_worker()
    wait_for(lambda: r.llen("seen:echo") == 1)


def test_quiet_a_process_from_the_busy_page(
    browser: Page, wurk: Wurk, r: Any, start_worker: Callable[..., Launcher], shots: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    worker = start_worker(run=True)
    jobs.blocks_until_released.perform_async("busy page")
    wait_for(lambda: r.llen("seen:blocked") == 1)
    wait_for(lambda: int(r.hget(worker.identity, "busy") or 0) == 1)
    page.goto(BASE + "busy/")
    row = page.locator(f'tr[data-identity="{worker.identity}"]')
    expect(row).to_contain_text("1 / 3")
    expect(page.locator("#wurk-running")).to_contain_text("tests.jobsapp.jobs.blocks_until_released")
    shots(page, "busy")
    row.get_by_role("button", name="Quiet").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Process {worker.identity} quieted")
    wait_for(lambda: r.hget(worker.identity, "quiet") == b"true")
    page.reload()
    expect(page.locator(f'tr[data-identity="{worker.identity}"] [data-quiet]')).to_have_text("quiet")
    expect(
        page.locator(f'tr[data-identity="{worker.identity}"]').get_by_role("button", name="Quiet")
    ).to_have_count(0)
    shots(page, "busy-quiet")


def test_script_in_job_data_is_shown_as_text_and_never_runs(
    browser: Page, wurk: Wurk, r: Any, shots: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    evil = payload(f"Evil{XSS}", [XSS, {"html": XSS_IMG}], tags=[XSS])
    push(r, evil, queue="default")
    retry_key = zadd(r, keys.RETRY, failed(f"Evil{XSS}", args=[XSS], error_message=f"boom {XSS} {XSS_IMG}"))
    zadd(r, keys.DEAD, failed(XSS, args=[XSS_IMG], error_message=XSS), time.time() - 5)
    add_process(r, "evil:1:abcdefabcdef", tag=XSS, labels=[XSS_IMG])
    write_metrics(r, f"Evil{XSS}")
    pages = {
        "queue": BASE + "queues/default/",
        "retries": BASE + "retries/",
        "retry-entry": BASE + f"retries/{retry_key}/",
        "dead": BASE + "dead/",
        "busy": BASE + "busy/",
        "metrics": BASE + "metrics/",
        "search": BASE + "retries/?q=" + "%3Cscript%3E",
    }
    for name, path in pages.items():
        page.goto(path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__xss") is None, f"script ran on {name}"
        expect(page.locator("#content")).to_contain_text("<script>window.__xss=1</script>")
        shots(page, f"xss-{name}")
    page.goto(BASE + "metrics/")
    page.locator("#wurk-metrics a").first.click()
    assert page.evaluate("window.__xss") is None
    expect(page.locator("h1")).to_have_text(f"Evil{XSS}")
    shots(page, "xss-metrics-class")


def test_screenshots_of_every_page(
    browser: Page,
    wurk: Wurk,
    r: Any,
    test_config: Config,
    use_app_settings: Callable[..., Settings],
    shots: Any,
    start_worker: Callable[..., Launcher],
) -> None:
    """Every page with data, in the light and the dark theme; read-only mode; Redis down."""
    from playwright.sync_api import expect

    page = browser
    for i in range(60):
        push(
            r,
            payload("app.jobs.SendInvoice", [i, f"customer-{i}@example.com", {"lines": list(range(i % 7))}]),
        )
    push(r, payload("app.jobs.Report", ["2026-11-29"], queue="reports"), queue="reports")
    r.sadd(keys.PAUSED, "reports")
    for i in range(30):
        zadd(r, keys.SCHEDULE, payload("app.jobs.Reminder", [i]), time.time() + 60 * (i + 1))
    long_message = "Connection refused while talking to the payment gateway " + "x" * 400
    retry_keys = [
        zadd(
            r,
            keys.RETRY,
            failed("app.jobs.Charge", args=[i, "EUR"], error_message=long_message),
            time.time() + 30 * i,
        )
        for i in range(12)
    ]
    aj = payload(
        "Sidekiq::ActiveJob::Wrapper",
        [
            {
                "job_class": "WelcomeMailer",
                "job_id": "5f3c",
                "provider_job_id": None,
                "queue_name": "mailers",
                "priority": None,
                "arguments": [
                    {"_aj_globalid": "gid://shop/User/7"},
                    {"greeting": "hi", "_aj_ruby2_keywords": ["greeting"]},
                ],
                "executions": 0,
                "exception_executions": {},
                "locale": "en",
                "timezone": "UTC",
                "enqueued_at": "2026-11-29T15:42:30Z",
            }
        ],
        wrapped="WelcomeMailer",
    )
    dead_aj = zadd(
        r,
        keys.DEAD,
        {**aj, **{k: v for k, v in failed().items() if k.startswith(("error", "failed", "retry_count"))}},
        time.time() - 100,
    )
    encrypted = zadd(
        r, keys.DEAD, failed("app.jobs.Secret", args=[7, "c2VjcmV0IGJsb2I="], encrypt=True), time.time() - 50
    )
    for i in range(5):
        zadd(r, keys.DEAD, failed("app.jobs.Broken", args=[i]), time.time() - 1000 * i)
    r.zadd(keys.DEAD, {b"\xff not json": time.time() - 5000})
    add_process(r, "web-1:4242:0123456789ab", busy_jobs=2)
    add_process(r, "worker-2:777:ba9876543210", busy_jobs=0, tag="", labels=[])
    r.set(keys.LEADER, "web-1:4242:0123456789ab")
    for name, runs in (("app.jobs.SendInvoice", 40), ("app.jobs.Charge", 12), ("app.jobs.Report", 3)):
        write_metrics(r, name, runs=runs, failures=runs // 6)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    r.set(keys.daily_stat("processed", today), 1234)
    r.set(keys.daily_stat("failed", today), 56)
    r.set(keys.STAT_PROCESSED, 98765)
    r.set(keys.STAT_FAILED, 432)

    views = [
        ("dashboard", BASE),
        ("dashboard-7-days", BASE + "?days=7"),
        ("busy", BASE + "busy/"),
        ("queues", BASE + "queues/"),
        ("queue", BASE + "queues/default/"),
        ("queue-page-3", BASE + "queues/default/?page=3&order=oldest"),
        ("scheduled", BASE + "scheduled/"),
        ("retries", BASE + "retries/"),
        ("retry-entry", BASE + f"retries/{retry_keys[0]}/"),
        ("dead", BASE + "dead/"),
        ("dead-activejob", BASE + f"dead/{dead_aj}/"),
        ("dead-encrypted", BASE + f"dead/{encrypted}/"),
        ("dead-search", BASE + "dead/?q=Broken"),
        ("metrics", BASE + "metrics/"),
        ("metrics-24h", BASE + "metrics/?period=24h"),
        ("metrics-class", BASE + "metrics/app.jobs.SendInvoice/"),
    ]
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)  # type: ignore[arg-type]
        for name, path in views:
            response = page.goto(path)
            assert response is not None and response.status == 200, f"{path}: {response and response.status}"
            shots(page, f"{name}-{theme}")
    page.emulate_media(color_scheme="light")

    # A phone-sized window: tables scroll inside their box instead of widening the page.
    page.set_viewport_size({"width": 414, "height": 860})
    for name, path in (
        ("dashboard", BASE),
        ("busy", BASE + "busy/"),
        ("retries", BASE + "retries/"),
        ("queues", BASE + "queues/"),
    ):
        page.goto(path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{path} is {overflow}px wider than the window"
        if name == "queues":
            # ...and their tables show every column, not a scroll box cutting the last ones off.
            clipped = page.evaluate(
                "Math.max(0, ...[...document.querySelectorAll('.wurk-scroll')].map(e => e.scrollWidth - e.clientWidth))"
            )
            assert clipped <= 1, f"{path}: a table is cut off by {clipped}px"
        shots(page, f"{name}-narrow")
    page.set_viewport_size({"width": 1280, "height": 860})

    # Confirmation pages.
    page.goto(BASE + "dead/")
    page.get_by_role("button", name="Delete all").click()
    expect(page.locator(".wurk-question")).to_contain_text("Delete all 8 jobs in the dead set?")
    shots(page, "confirm-delete-all")
    page.goto(BASE + "queues/")
    page.locator('tr[data-queue="reports"]').get_by_role("button", name="Clear").click()
    expect(page.locator(".wurk-question")).to_contain_text("Delete all 1 job in queue “reports”?")
    shots(page, "confirm-clear-queue")
    page.get_by_role("button", name="Yes, clear the queue").click()
    expect(page.locator(".messagelist")).to_contain_text("Cleared queue “reports”")
    shots(page, "queues-after-clear")

    # Read-only: no action buttons anywhere.
    use_app_settings(dashboard_read_only=True)
    page.goto(BASE + "retries/")
    expect(page.locator(".wurk-banner-info")).to_contain_text("Read-only mode")
    expect(page.get_by_role("button", name="Retry now")).to_have_count(0)
    shots(page, "read-only-retries")

    # Redis down: a banner, HTTP 503, never a traceback; the live poll reports it too.
    use_app_settings()
    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0"))
    response = page.goto(BASE)
    assert response is not None and response.status == 503
    expect(page.locator(".wurk-banner-error")).to_contain_text("Redis is unavailable")
    shots(page, "redis-down")
    page.emulate_media(color_scheme="dark")
    shots(page, "redis-down-dark")


def test_cancel_a_running_job_from_the_busy_page_and_a_waiting_one_from_its_queue(
    browser: Page, wurk: Wurk, r: Any, start_worker: Callable[..., Launcher], shots: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    page.on("dialog", lambda dialog: dialog.accept())  # the buttons' "Cancel this job?"
    worker = start_worker(run=True)
    running = jobs.blocks_until_released.perform_async("cancel me")
    wait_for(lambda: r.llen("seen:blocked") == 1)
    wait_for(lambda: int(r.hget(worker.identity, "busy") or 0) == 1)
    page.goto(BASE + "busy/")
    row = page.locator("#wurk-running tr", has_text=running)
    row.get_by_role("button", name="Cancel").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Cancelled job {running}.")
    assert r.hexists(keys.iteration_state(running), keys.CANCELLED_FIELD)
    shots(page, "busy-cancelled")
    worker.signal("TSTP")  # quiet: the job below stays in its queue
    wait_for(lambda: r.hget(worker.identity, "quiet") == b"true")
    waiting = jobs.echo.perform_async("never")
    page.goto(BASE + "queues/default/")
    page.locator("#wurk-queue-jobs tr", has_text=waiting).get_by_role("button", name="Cancel").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Cancelled job {waiting}.")
    assert r.llen(keys.queue("default")) == 0
    shots(page, "queue-cancelled")
