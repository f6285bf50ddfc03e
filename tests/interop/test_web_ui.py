"""Sidekiq 6.4.1's own Web UI, served by ``rackup``, on data our Python code wrote.

Every page is fetched over real HTTP from ``Sidekiq::Web`` (``ruby/web.ru``) and saved under
``test-output/web_ui/<test>/`` for inspection. Forms are posted as a browser posts them:
the fields of the form on the page (its CSRF ``authenticity_token`` included) plus the
button pressed, with the session cookie the page set. Redis is checked afterwards.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from django_wurk import Config, Wurk
from django_wurk.core.wire import TimestampStyle
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.interop.conftest import RUBY_DIR, ruby_env
from tests.jobsapp import activejob_jobs, jobs

OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "web_ui"

BLOCKS = "tests.jobsapp.jobs.blocks_until_released"
ALWAYS_FAILS = "tests.jobsapp.jobs.always_fails"
DIES_AT_ONCE = "tests.jobsapp.jobs.dies_at_once"
ECHO = "tests.jobsapp.jobs.echo"
CRITICAL = "tests.jobsapp.jobs.critical"


# The server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web_ui(ruby: None, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``Sidekiq::Web`` under WEBrick on a free port of 127.0.0.1 only; its base URL."""
    if not shutil.which("rackup"):
        problem = "rackup is not installed (apt-get install ruby-rack ruby-webrick)"
        if os.environ.get("WURK_REQUIRE_RUBY") == "1":
            pytest.fail(f"WURK_REQUIRE_RUBY=1 but {problem}")
        pytest.skip(problem)
    logfile = tmp_path_factory.mktemp("web_ui") / "rackup.log"
    with logfile.open("w") as log:
        # -p 0: the kernel picks the port and WEBrick logs the one it bound (no race).
        proc = subprocess.Popen(
            [
                "rackup",
                "-s",
                "webrick",
                "-E",
                "development",
                "-o",
                "127.0.0.1",
                "-p",
                "0",
                str(RUBY_DIR / "web.ru"),
            ],
            env=ruby_env(redis_url),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def bound_port() -> int | None:
        if proc.poll() is not None:
            raise AssertionError(f"rackup exited early:\n{logfile.read_text()}")
        found = re.search(r"HTTPServer#start: pid=\d+ port=(\d+)", logfile.read_text())
        return int(found.group(1)) if found else None

    try:
        port = wait_for(bound_port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# A tiny browser -----------------------------------------------------------------------


@dataclass
class Form:
    action: str
    method: str
    fields: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (tag, attributes)

    def hidden(self, name: str) -> str | None:
        for tag, a in self.fields:
            if tag == "input" and a.get("type") == "hidden" and a.get("name") == name:
                return a.get("value", "")
        return None

    def buttons(self) -> set[str]:
        return {a["name"] for tag, a in self.fields if a.get("type", "submit") == "submit" and a.get("name")}


class FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._open: Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._open = Form(a.get("action", ""), a.get("method", "get").lower())
            self.forms.append(self._open)
        elif tag in ("input", "button") and self._open is not None:
            if tag == "button":
                a.setdefault("type", "submit")
            self._open.fields.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


@dataclass
class Page:
    path: str
    status: int
    headers: http.client.HTTPMessage
    html: str

    def forms(self) -> list[Form]:
        parser = FormParser()
        parser.feed(self.html)
        return parser.forms

    def form(self, button: str, action: str | None = None, **hidden: str) -> Form:
        """The one form with this submit button (posting to ``action``, with these hidden values)."""
        found = [
            f
            for f in self.forms()
            if button in f.buttons()
            and (action is None or f.action == action)
            and all(f.hidden(k) == v for k, v in hidden.items())
        ]
        assert len(found) == 1, f"{len(found)} forms with button {button!r} {action} {hidden} on {self.path}"
        return found[0]


def assert_rendered(page: Page) -> None:
    """HTTP 200 and none of Rack::ShowExceptions' markers (the development-mode error page)."""
    assert page.status == 200, f"{page.path}: HTTP {page.status}\n{page.html[:3000]}"
    assert 'id="traceback"' not in page.html and 'id="explanation"' not in page.html, page.html[:3000]
    assert "</html>" in page.html


class Browser:
    """One session: keeps the session cookie and saves every page it fetches."""

    def __init__(self, base: str, outdir: Path) -> None:
        self.host, self.port = urlsplit(base).hostname or "", urlsplit(base).port or 80
        self.cookies: dict[str, str] = {}
        self.outdir = outdir
        self.count = 0

    def request(self, method: str, path: str, body: str | None = None) -> Page:
        headers = {"Accept": "text/html"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            html = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for cookie in resp.headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return Page(path, resp.status, resp.headers, html)

    def get(self, path: str) -> Page:
        page = self.request("GET", path)
        self.count += 1
        slug = re.sub(r"[^A-Za-z0-9.-]+", "_", path.strip("/")) or "dashboard"
        self.outdir.mkdir(parents=True, exist_ok=True)
        (self.outdir / f"{self.count:02d}-{slug}.html").write_text(page.html)
        assert_rendered(page)
        return page

    def submit(self, page: Page, form: Form, button: str, check: tuple[str, ...] = ()) -> Page:
        """Post ``form`` as a browser does when ``button`` is clicked with ``check`` boxes ticked."""
        assert form.method == "post"
        data: list[tuple[str, str]] = []
        for _tag, a in form.fields:
            kind, name, value = a.get("type", "text"), a.get("name"), a.get("value", "")
            if not name:
                continue
            if (
                kind in ("hidden", "text")
                or (kind == "checkbox" and value in check)
                or (kind == "submit" and name == button)
            ):
                data.append((name, value))
        assert any(name == "authenticity_token" for name, _ in data), "the form carries no CSRF token"
        response = self.request("POST", form.action or page.path, urlencode(data))
        # Sidekiq::Web answers every successful action with a redirect; 403 is a CSRF refusal.
        assert response.status == 302, f"POST {form.action}: HTTP {response.status}\n{response.html[:3000]}"
        return response


@pytest.fixture
def browser(web_ui: str, request: pytest.FixtureRequest) -> Browser:
    outdir = OUTPUT / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(outdir, ignore_errors=True)
    return Browser(web_ui, outdir)


# Our data -----------------------------------------------------------------------------


@pytest.fixture
def start_worker(wurk: Wurk) -> Iterator[Callable[[], Launcher]]:
    """Start in-process workers on the engine as configured now; all stopped at teardown."""
    started: list[Launcher] = []

    def start() -> Launcher:
        worker = Launcher(wurk)
        worker.start()
        started.append(worker)
        return worker

    yield start
    jobs.release.set()
    try:
        for worker in started:
            worker.stop()
    finally:
        jobs.release.clear()


def entries(r: Any, key: str) -> list[tuple[str, dict[str, Any], float]]:
    return [(m.decode(), json.loads(m), s) for m, s in r.zrange(key, 0, -1, withscores=True)]


def entry_key(r: Any, key: str, jid: str) -> str:
    """The Web UI's address of an entry: ``<score>-<jid>``, the score as Ruby prints a Float."""
    [score] = [s for _, p, s in entries(r, key) if p["jid"] == jid]
    return f"{score!r}-{jid}"


def queued(r: Any, queue: str) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.lrange(f"queue:{queue}", 0, -1)]


def busy_work(r: Any, key: str) -> list[dict[str, Any]]:
    return [json.loads(v) for v in r.hvals(key)]


def wait_running(r: Any, worker: Launcher, jid: str, key_suffix: str = ":work") -> None:
    """Until a heartbeat has published ``jid`` as running: in the busy-work hash and in ``busy``."""
    wait_for(lambda: [w for w in busy_work(r, worker.identity + key_suffix) if jid in w["payload"]])
    wait_for(lambda: r.hget(worker.identity, "busy") == b"1")


def fail_into_retry(r: Any, n: int, failures: int = 1) -> str:
    """``always_fails`` (retry 2) failed ``failures`` times by a running worker: its retry entry's jid."""
    jid = jobs.always_fails.perform_async(n)
    assert jid
    for count in range(failures):
        if count:  # make the entry due so the poller hands it to the worker again
            [(member, _, _)] = [e for e in entries(r, "retry") if e[1]["jid"] == jid]
            r.zadd("retry", {member: 1.0}, xx=True)
        wait_for(
            lambda c=count: [
                p for _, p, _ in entries(r, "retry") if p["jid"] == jid and p["retry_count"] == c
            ]
        )
    return jid


def kill_into_dead(r: Any, n: int) -> str:
    jid = jobs.dies_at_once.perform_async(n)
    assert jid
    wait_for(lambda: [p for _, p, _ in entries(r, "dead") if p["jid"] == jid])
    return jid


def text(html: str) -> str:
    """The page's text with tags removed and whitespace collapsed, for row-level checks."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# Pages --------------------------------------------------------------------------------


def test_every_page_renders_our_data(
    wurk: Wurk, r: Any, test_config: Config, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    wurk.configure(test_config.replace(legacy_workers_key=True, labels=("web-ui",), tag="wurk-tag"))
    worker = start_worker()
    running = jobs.blocks_until_released.perform_async("busy-arg")
    assert running
    wait_running(r, worker, running, ":workers")
    retrying = fail_into_retry(r, 7)
    dead = kill_into_dead(r, 8)
    scheduled = jobs.echo.perform_in(3600, "later", {"n": 1})
    waiting = jobs.critical.set(queue="unworked").perform_async("waiting-arg")  # tags ["alpha"]
    rails = activejob_jobs.hello.set(queue="unworked").perform_async("rails-arg")  # Rails' wrapper shape
    wait_for(lambda: int(r.get("stat:failed") or 0) == 2 and int(r.get("stat:processed") or 0) == 2)
    assert scheduled and waiting and rails

    dashboard = browser.get("/").html
    counts = dict(re.findall(r'<span id="txt(\w+)" class="count">([\d,]+)</span>', dashboard))
    assert counts == {
        "Processed": "2",
        "Failed": "2",
        "Busy": "1",
        "Enqueued": "2",
        "Retries": "1",
        "Scheduled": "1",
        "Dead": "1",
    }

    busy = browser.get("/busy")
    busy_text = text(busy.html)
    assert f"testhost:{worker.identity.split(':')[1]}" in busy_text
    assert "wurk-tag" in busy_text and "web-ui" in busy_text and "Queues: default" in busy_text
    busy.form("quiet", identity=worker.identity)  # the process row's own Quiet/Stop form
    assert running in busy.html and BLOCKS in busy.html and "&quot;busy-arg&quot;" in busy.html
    assert 'href="/queues/default">default</a>' in busy.html

    queues = browser.get("/queues").html
    assert 'href="/queues/unworked">unworked</a>' in queues
    queue = browser.get("/queues/unworked").html
    assert waiting in queue and CRITICAL in queue and "&quot;waiting-arg&quot;" in queue
    assert "jobtag'>alpha</span>" in queue
    # The ActiveJob wrapper is looked through: the Rails class and its arguments are shown.
    [aj_row] = [text(row) for row in queue.split("<tr>") if rails in row]
    assert "HelloJob" in aj_row and "&quot;rails-arg&quot;" in aj_row and "JobWrapper" not in aj_row

    # List pages link each entry as <score>-<jid>, the score printed as Python's repr prints it.
    pages = {
        "retry": ("/retries", "/retries/", retrying, ALWAYS_FAILS, "ValueError: boom 7"),
        "schedule": ("/scheduled", "/scheduled/", scheduled, ECHO, "&quot;later&quot;"),
        "dead": ("/morgue", "/morgue/", dead, DIES_AT_ONCE, "RuntimeError: fatal 8"),
    }
    for zset, (list_path, entry_prefix, jid, klass, shown) in pages.items():
        listing = browser.get(list_path).html
        key = entry_key(r, zset, jid)
        assert f'href="{entry_prefix}{key}"' in listing, f"{key} not linked from {list_path}"
        assert klass in listing and shown in listing
        entry = browser.get(entry_prefix + key)
        assert jid in entry.html and klass in entry.html
        assert entry.form("delete").action == entry_prefix + key

    retry_page = text(browser.get(f"/retries/{entry_key(r, 'retry', retrying)}").html)
    assert "ValueError" in retry_page and "boom 7" in retry_page
    assert "in `always_fails'" in retry_page  # our backtrace, decoded by Ruby
    dead_page = text(browser.get(f"/morgue/{entry_key(r, 'dead', dead)}").html)
    assert "RuntimeError" in dead_page and "fatal 8" in dead_page

    stats = json.loads(browser.request("GET", "/stats").html)["sidekiq"]
    assert (stats["busy"], stats["retries"], stats["dead"], stats["scheduled"]) == (1, 1, 1, 1)


def test_ms_timestamps_render_as_far_future_dates_in_6_4_1(
    wurk: Wurk, r: Any, test_config: Config, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    """Known difference: ``TIMESTAMPS="ms"`` (Sidekiq 8's integers) is read as seconds by 6.x/7.x."""
    wurk.configure(test_config.replace(timestamps=TimestampStyle.INT_MILLISECONDS))
    start_worker()
    jid = fail_into_retry(r, 4)
    jobs.echo.set(queue="unworked").perform_async("ms")
    [(_, payload, score)] = entries(r, "retry")
    assert isinstance(payload["failed_at"], int) and payload["failed_at"] > 10**12
    page = browser.get(f"/retries/{entry_key(r, 'retry', jid)}").html
    years = sorted(int(y) for y in re.findall(r'<time class="ltr" dir="ltr" title="(\d+)-', page))
    # Created, Enqueued and Originally failed come out some 56,000 years ahead; Next retry is
    # the ZSET score, seconds in every version, so it is right.
    assert years[0] == time.gmtime(score).tm_year and len(years) == 4
    assert all(58_000 < y < 60_000 for y in years[1:])
    queues = browser.get("/queues").html
    [row] = [row for row in queues.split("<tr>") if 'href="/queues/unworked"' in row]
    assert re.search(r"<td>-1,\d{3},", row), row  # latency: now - enqueued_at, about -1.8e12 s


# Entry actions ------------------------------------------------------------------------


def test_retry_now_requeues_with_retry_count_lowered_and_our_worker_runs_it(
    wurk: Wurk, r: Any, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    worker = start_worker()
    jid = fail_into_retry(r, 5, failures=2)  # retry_count 1
    worker.stop()  # so the requeued job waits in its queue to be looked at
    [(_, before, _)] = entries(r, "retry")

    page = browser.get(f"/retries/{entry_key(r, 'retry', jid)}")
    browser.submit(page, page.form("retry"), "retry")

    assert r.zcard("retry") == 0
    [job] = queued(r, "default")
    assert job["retry_count"] == 0 and job["jid"] == jid and job["args"] == [5]
    assert job["enqueued_at"] > before["enqueued_at"]
    unchanged = (
        "class",
        "queue",
        "retry",
        "backtrace",
        "failed_at",
        "retried_at",
        "created_at",
        "error_message",
    )
    assert {k: job[k] for k in unchanged} == {k: before[k] for k in unchanged}

    # Our worker takes the Web UI's push: it fails again, counted from the lowered value.
    start_worker()
    wait_for(lambda: [p for _, p, _ in entries(r, "retry") if p["jid"] == jid])
    [(_, after, _)] = entries(r, "retry")
    assert after["retry_count"] == 1 and after["retried_at"] > before["retried_at"]


def test_retry_now_from_the_morgue(
    wurk: Wurk, r: Any, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    worker = start_worker()
    jid = kill_into_dead(r, 3)
    worker.stop()
    page = browser.get(f"/morgue/{entry_key(r, 'dead', jid)}")
    browser.submit(page, page.form("retry"), "retry")
    assert r.zcard("dead") == 0
    [job] = queued(r, "default")
    # Sidekiq lowers a first-failure count of 0 to -1; our worker then counts it back to 0.
    assert job["jid"] == jid and job["retry_count"] == -1
    start_worker()
    wait_for(lambda: [p for _, p, _ in entries(r, "dead") if p["jid"] == jid])
    [(_, again, _)] = entries(r, "dead")
    assert again["retry_count"] == 0 and again["retried_at"] >= again["failed_at"]


def test_delete_on_each_entry_page(
    wurk: Wurk, r: Any, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    start_worker()
    retry_jids = [fail_into_retry(r, n) for n in (1, 2)]
    dead_jids = [kill_into_dead(r, n) for n in (1, 2)]
    scheduled_jids = [jobs.echo.perform_in(3600, n) for n in (1, 2)]
    for zset, prefix, (gone, kept) in (
        ("retry", "/retries/", retry_jids),
        ("dead", "/morgue/", dead_jids),
        ("schedule", "/scheduled/", scheduled_jids),
    ):
        assert gone and kept
        page = browser.get(prefix + entry_key(r, zset, gone))
        browser.submit(page, page.form("delete"), "delete")
        assert [p["jid"] for _, p, _ in entries(r, zset)] == [kept], zset


def test_kill_from_the_retries_list_moves_the_exact_entry_to_dead(
    wurk: Wurk, r: Any, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    start_worker()
    doomed, spared = fail_into_retry(r, 1), fail_into_retry(r, 2)
    [member] = [m for m, p, _ in entries(r, "retry") if p["jid"] == doomed]
    page = browser.get("/retries")
    browser.submit(page, page.form("kill", action="/retries"), "kill", check=(entry_key(r, "retry", doomed),))
    assert [p["jid"] for _, p, _ in entries(r, "retry")] == [spared]
    [(dead_member, _, _)] = entries(r, "dead")
    assert dead_member == member  # killed verbatim: our JSON, byte for byte


def test_add_to_queue_on_a_scheduled_entry_runs_it_now(
    wurk: Wurk, r: Any, start_worker: Callable[[], Launcher], browser: Browser
) -> None:
    jid = jobs.echo.perform_in(3600, "from-the-ui", 42)
    assert jid
    page = browser.get(f"/scheduled/{entry_key(r, 'schedule', jid)}")
    browser.submit(page, page.form("add_to_queue"), "add_to_queue")
    assert r.zcard("schedule") == 0
    [job] = queued(r, "default")
    assert job["jid"] == jid and job["args"] == ["from-the-ui", 42] and "enqueued_at" in job
    start_worker()
    wait_for(lambda: r.lrange("seen:echo", 0, -1))
    assert [json.loads(x) for x in r.lrange("seen:echo", 0, -1)] == [["from-the-ui", 42]]


# Busy: Quiet and Stop -----------------------------------------------------------------


@dataclass
class Running:
    launcher: Launcher
    thread: threading.Thread


@pytest.fixture
def run_worker(wurk: Wurk, r: Any) -> Iterator[Callable[[], Running]]:
    """``Launcher.run(handle_os_signals=False)`` in a thread, as ``runwurk`` runs it; TERM at teardown."""
    started: list[Running] = []

    def start() -> Running:
        launcher = Launcher(wurk)
        thread = threading.Thread(target=launcher.run, kwargs={"handle_os_signals": False}, daemon=True)
        thread.start()
        started.append(Running(launcher, thread))
        wait_for(lambda: r.sismember("processes", launcher.identity))
        return started[-1]

    yield start
    for running in started:
        running.launcher.signal("TERM")
    for running in started:
        running.thread.join(10)


def test_quiet_button_quiets_that_worker_only(
    wurk: Wurk, r: Any, test_config: Config, run_worker: Callable[[], Running], browser: Browser
) -> None:
    wurk.configure(test_config.replace(redis_pool_size=30))  # two workers share this engine's pool
    worker, other = run_worker().launcher, run_worker().launcher
    page = browser.get("/busy")
    assert "quiet" in page.form("stop", identity=worker.identity).buttons()
    browser.submit(page, page.form("quiet", identity=worker.identity), "quiet")
    wait_for(lambda: r.hget(worker.identity, "quiet") == b"true")
    assert worker.manager.quieting.is_set() and not other.manager.quieting.is_set()
    assert r.hget(other.identity, "quiet") == b"false"
    # The page now labels it quiet and offers only Stop for it.
    page = browser.get("/busy")
    assert page.form("stop", identity=worker.identity).buttons() == {"stop"}
    assert "quiet" in page.form("stop", identity=other.identity).buttons()
    assert re.search(r'label-danger">quiet</span>', page.html)


def test_stop_button_stops_that_worker(
    wurk: Wurk, r: Any, test_config: Config, run_worker: Callable[[], Running], browser: Browser
) -> None:
    wurk.configure(test_config.replace(redis_pool_size=30))
    running, other = run_worker(), run_worker()
    worker = running.launcher
    page = browser.get("/busy")
    browser.submit(page, page.form("stop", identity=worker.identity), "stop")
    running.thread.join(10)
    assert not running.thread.is_alive(), "run() did not return after the Web UI's Stop"
    assert worker.stopped.is_set() and not r.sismember("processes", worker.identity)
    assert other.thread.is_alive() and r.sismember("processes", other.launcher.identity)
    page = browser.get("/busy")
    assert worker.identity not in page.html and other.launcher.identity in page.html


# LEGACY_WORKERS_KEY -------------------------------------------------------------------


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy_workers_key", "default"])
def test_busy_page_of_a_6_4_1_web_ui_shows_our_jobs_only_with_legacy_workers_key(
    legacy: bool,
    wurk: Wurk,
    r: Any,
    test_config: Config,
    start_worker: Callable[[], Launcher],
    browser: Browser,
) -> None:
    wurk.configure(test_config.replace(legacy_workers_key=legacy))
    worker = start_worker()
    jid = jobs.blocks_until_released.perform_async("legacy-arg")
    assert jid
    wait_running(r, worker, jid)
    assert r.exists(f"{worker.identity}:workers") == int(legacy)
    html = browser.get("/busy").html
    jobs_table = html.split('class="workers table', 1)[1]
    processes_table = html.split('class="processes table', 1)[1].split("</table>", 1)[0]
    # The process is listed either way, busy 1 (from its hash), and the Busy stat counts it.
    assert worker.identity in processes_table and "<td>1</td>" in processes_table
    assert re.search(r"<h3>1</h3>\s*<p>Busy</p>", html)
    if legacy:
        row = text(jobs_table.split("</table>", 1)[0])
        assert jid in row and BLOCKS in row and '"legacy-arg"' in row.replace("&quot;", '"')
        assert worker.identity in row and 'href="/queues/default"' in jobs_table
    else:
        # Known difference: Sidekiq <= 6.4.1 reads <identity>:workers, we write <identity>:work.
        assert jid not in html and BLOCKS not in html
        assert "<td>" not in jobs_table.split("</table>", 1)[0]
