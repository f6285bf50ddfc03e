"""The example project's order import: a batch of one job per line, and a summary email
sent by its ``complete`` callback once every line has run (one line fails on purpose)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django_wurk import BatchStatus, Wurk
from tests.conftest import wait_for
from tests.test_example_project import manage, orders, run, shell, stop

IMPORT_SCRIPT = r"""
import html, json, re
from django.test import Client
from orders.forms import SAMPLE_IMPORT

c = Client(enforce_csrf_checks=True, HTTP_HOST="localhost")
page = c.get("/orders/").content.decode()
token = c.cookies["csrftoken"].value
response = c.post("/orders/import/", {"csrfmiddlewaretoken": token, "lines": SAMPLE_IMPORT,
                                      "notify": "ops@example.com"})
assert response.status_code == 302, response.content[:3000]
page = c.get("/orders/").content.decode()
print(json.dumps({"form": "Import orders (a batch)" in page,
                  "messages": [html.unescape(m) for m in re.findall(r'<li class="\w+">(.*?)</li>', page, re.S)]}))
"""


def test_an_order_import_emails_its_summary_when_every_row_has_run(
    wurk: Wurk, r: Any, redis_url: str, tmp_path: Path
) -> None:
    run(redis_url, tmp_path, "migrate", "--noinput", "-v", "0")
    client = shell(redis_url, tmp_path, IMPORT_SCRIPT)
    assert client["form"]
    [message] = client["messages"]
    bid = re.findall(r"Import started as batch (\S+) \(4 rows\)", message)[0]
    # A link to the batch's page (the rest of the message is text: escaped, as the email is).
    assert f'<a href="/admin/django_wurk/dashboard/batches/{bid}/">Follow it on the dashboard</a>' in message
    assert BatchStatus(bid).total == 4 and not BatchStatus(bid).complete
    worker = manage(redis_url, tmp_path, "runwurk", "-c", "3", "-q", "default")
    try:
        wait_for(lambda: BatchStatus(bid).complete and r.llen("queue:default") == 0, timeout=30)
        wait_for(lambda: r.get("stat:processed") == b"5", timeout=15)  # 4 rows + the callback
    finally:
        out, _ = stop(worker)
    assert sorted(o["customer_email"] for o in orders(tmp_path)) == [
        "alan@example.com",
        "grace@example.com",
        "linus@example.com",
    ]
    [dead] = [json.loads(m) for m in r.zrange("dead", 0, -1)]
    assert dead["error_class"] == "ImportRowError" and "line 3" in dead["error_message"]
    assert out.count("Subject: Order import: 3 imported, 1 failed") == 1
    assert "To: ops@example.com" in out and "rows:     4" in out
    status = BatchStatus(bid)
    assert status.complete and status.died and not status.succeeded and status.dead_jids == [dead["jid"]]
