"""The example project stays runnable: its checks pass and its jobs run on a real worker.

Everything runs as ``make run`` runs it: ``manage.py`` subprocesses on the example settings
(a SQLite file per test, this suite's Valkey), and a real ``runwurk`` worker. Requests go
through Django's test client inside ``manage.py shell``, with CSRF checks on. The shipping
API is told never to fail (``SHIPPING_FAILURE_RATE=0``) so the outcome is certain.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from contextlib import closing
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

from django_wurk import Wurk
from tests.conftest import free_port, tail, wait_for

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"


def manage(redis_url: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WURK_", "DJANGO_"))}
    env.update(
        WURK_REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'example.sqlite3'}",
        DJANGO_SETTINGS_MODULE="example.settings",
        SHIPPING_FAILURE_RATE="0",
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(redis_url: str, tmp_path: Path, *args: str) -> str:
    """Run a management command to completion; its stdout."""
    proc = manage(redis_url, tmp_path, *args)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    return out


def shell(redis_url: str, tmp_path: Path, script: str) -> Any:
    """Run ``script`` in ``manage.py shell``; the JSON it prints last (Django 5.2+ may print a banner)."""
    return json.loads(run(redis_url, tmp_path, "shell", "-c", script).strip().splitlines()[-1])


def orders(tmp_path: Path) -> list[dict[str, Any]]:
    """The example's order rows, read straight from its SQLite file."""
    with closing(sqlite3.connect(tmp_path / "example.sqlite3", timeout=10)) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM orders_order ORDER BY id")]


def stop(worker: subprocess.Popen[str]) -> tuple[str, str]:
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    return out, err


def test_example_checks_seeds_and_runs_its_demo_jobs(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path
) -> None:
    run(redis_url, tmp_path, "check", "--fail-level", "WARNING")
    run(redis_url, tmp_path, "migrate", "--noinput", "-v", "0")

    out = run(redis_url, tmp_path, "demo_seed")
    assert out.count("seeded") == 6
    queued = [json.loads(x)["class"] for x in r.lrange("queue:default", 0, -1)]
    assert sorted(queued) == ["demo.jobs.Slow", "demo.jobs.flaky", "demo.jobs.quick",
                              "orders.jobs.call_shipping_api", "orders.jobs.send_confirmation_email"]  # fmt: skip
    [report] = [json.loads(x) for x in r.zrange("schedule", 0, -1)]
    assert report["class"] == "orders.jobs.nightly_report" and report["queue"] == "reports"
    [seeded] = orders(tmp_path)
    assert seeded["status"] == "new" and seeded["confirmation_sent_at"] is None

    worker = manage(redis_url, tmp_path, "runwurk", "-c", "3", "-q", "default", "-q", "reports")
    try:
        wait_for(lambda: r.llen("queue:default") == 0 and r.zcard("retry") == 1, timeout=30)
        [failed] = [json.loads(m) for m in r.zrange("retry", 0, -1)]
        assert failed["class"] == "demo.jobs.flaky" and "demo failure" in failed["error_message"]
        wait_for(lambda: orders(tmp_path)[0]["confirmation_sent_at"] is not None, timeout=10)
    finally:
        out, err = stop(worker)
    assert "demo.jobs.quick" in err  # the job log names each job
    assert f"Subject: Your order #{seeded['id']} is confirmed" in out  # the console email backend


# Runs inside `manage.py shell` on the example settings: the test client, CSRF enforced.
CLIENT_SCRIPT = r"""
import html, json, re
from django.test import Client

c = Client(enforce_csrf_checks=True, HTTP_HOST="localhost")
out = {"index": c.get("/orders/").status_code}
token = c.cookies["csrftoken"].value
out["without_csrf"] = c.post("/orders/place/", {"customer_email": "x@example.com", "item": "Milk frother",
                                                "quantity": "1"}).status_code

def post(path, **data):
    response = c.post(path, {"csrfmiddlewaretoken": token, **data})
    assert response.status_code == 302, (path, response.status_code, response.content[:3000])
    return response["Location"]

post("/orders/place/", customer_email="ada@example.com", item="Milk frother", quantity="3")
post("/orders/place/", customer_email="rollback@example.com", item="Milk frother", quantity="1",
     fail_after_enqueue="on")
page = c.get("/orders/").content.decode()
out["messages"] = [html.unescape(m) for m in re.findall(r'<li class="\w+">(.*?)</li>', page, re.S)]
out["task_page"] = post("/orders/recalculate/")
print(json.dumps(out))
"""

RESULT_SCRIPT = r"""
import json
from django.test import Client

c = Client(HTTP_HOST="localhost")
print(json.dumps({"task": c.get("{task_page}").content.decode(),
                  "table": c.get("/orders/table/").content.decode()}))
"""


def test_an_order_is_confirmed_on_commit_and_a_rolled_back_one_enqueues_nothing(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path
) -> None:
    run(redis_url, tmp_path, "migrate", "--noinput", "-v", "0")
    worker = manage(redis_url, tmp_path, "runwurk", "-c", "3", "-q", "default", "-q", "reports")
    try:
        client = shell(redis_url, tmp_path, CLIENT_SCRIPT)
        assert client["index"] == 200 and client["without_csrf"] == 403
        placed, rolled_back = client["messages"]
        order_id, email_jid, shipping_jid = re.findall(
            r"Order #(\d+) placed\. Its confirmation email \(jid (\w+)\) and shipping call \(jid (\w+)\)",
            placed,
        )[0]
        lost_jids = re.findall(r"jid (\w{24})", rolled_back)
        assert rolled_back.startswith("The order was rolled back") and len(lost_jids) == 2

        # The worker ran the confirmation email (and the shipping call) for the committed order.
        wait_for(lambda: orders(tmp_path)[0]["confirmation_sent_at"] is not None, timeout=15)
        wait_for(lambda: orders(tmp_path)[0]["status"] == "shipped", timeout=15)
        [order] = orders(tmp_path)  # the rolled-back order left no row
        assert order["id"] == int(order_id) and order["customer_email"] == "ada@example.com"

        # The django.tasks task ran too; its result page reads it back with get_result().
        result_id = client["task_page"].rstrip("/").rsplit("/", 1)[-1]
        wait_for(lambda: r.hget(f"wurk-task-result:{result_id}", "status") == b"SUCCESSFUL", timeout=15)
        pages = shell(redis_url, tmp_path, RESULT_SCRIPT.replace("{task_page}", client["task_page"]))
        assert '<td id="status">SUCCESSFUL</td>' in pages["task"]
        assert '"Milk frother": {\n      "orders": 1,\n      "quantity": 3' in html.unescape(pages["task"])
        assert "Shipped" in pages["table"] and "not yet" not in pages["table"]
    finally:
        out, err = stop(worker)

    assert f"Subject: Your order #{order_id} is confirmed" in out and "To: ada@example.com" in out
    assert "rollback@example.com" not in out
    for jid in (email_jid, shipping_jid):
        assert f"jid={jid} class=" in err
    # Nothing of the rolled-back order reached Redis: no log line, no entry, three jobs run in all.
    assert not [jid for jid in lost_jids if jid in err]
    assert all(r.llen(f"queue:{q}") == 0 for q in ("default", "reports"))
    assert r.zcard("schedule") == r.zcard("retry") == r.zcard("dead") == 0
    assert r.get("stat:processed") == b"3" and r.get("stat:failed") is None


def test_make_run_prints_the_dashboard_link_and_the_demo_pages_lead_to_it(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path
) -> None:
    """``run.py`` (what ``make run`` runs) as a new user meets it: the dashboard link and its
    credentials in the terminal, a login with them, and the dashboard answering on the real server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WURK_", "DJANGO_"))}
    env.update(
        WURK_REDIS_URL=redis_url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'example.sqlite3'}",
        PORT=str(free_port()),
        SHIPPING_FAILURE_RATE="0",
    )
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "run.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()

    def started() -> bool:
        assert proc.poll() is None, "".join(lines)
        return any("press Ctrl-C to stop everything" in line for line in list(lines))

    try:
        wait_for(started, timeout=90)  # the banner is printed once the web server answers
        found = [m for m in map(DASHBOARD_LINE.search, lines) if m]
        assert found, "".join(lines)
        url, user, password = found[0].groups()
        base = url.split("/admin/", 1)[0]
        assert url == f"{base}/admin/django_wurk/dashboard/"

        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        login = f"{base}/admin/login/?next=/admin/django_wurk/dashboard/"
        form = browser.open(login, timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token, form
        fields = {"username": user, "password": password, "csrfmiddlewaretoken": token.group(1)}
        data = urllib.parse.urlencode({**fields, "next": "/admin/django_wurk/dashboard/"}).encode()
        with browser.open(
            urllib.request.Request(login, data=data, headers={"Referer": login}), timeout=30
        ) as page:
            assert (page.status, page.url) == (200, url)  # the login went through, then to the dashboard
            assert "Live throughput" in page.read().decode()

        for demo_page in ("/", "/orders/"):
            body = browser.open(base + demo_page, timeout=30).read().decode()
            assert 'href="/admin/django_wurk/dashboard/"' in body, demo_page
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(10)
    assert proc.returncode == 0, "".join(lines)


DASHBOARD_LINE = re.compile(r"dashboard:\s+(http://\S+)\s+\(log in as (\S+) / (\S+)\)")
