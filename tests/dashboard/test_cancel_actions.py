"""The dashboard's Cancel buttons: Busy (running jobs), a queue's page, the scheduled and retry pages.

What each does in Redis, what it says (a job that has gone is said to be gone), that it is
audited, and that hostile jids pass through it without an error page. Permissions and CSRF
for the action are checked with every other action in ``test_permissions.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.test import Client

from django_wurk.core import keys, wire
from tests.dashboard.conftest import add_process, failed, payload, push, url, zadd
from tests.dashboard.test_actions import said


def test_a_queued_job_is_cancelled_from_its_queue_page(manager: Client, r: Any, caplog: Any) -> None:
    job = payload()
    push(r, job)
    other = payload()
    push(r, other)
    page = manager.get(url("queue", name="default")).content.decode()
    assert page.count(">Cancel</button>") == 2
    caplog.set_level(logging.INFO, logger="django_wurk.dashboard")
    response = manager.post(
        url("job_cancel"), {"jid": job["jid"], "from": "queue", "name": "default", "next": "?page=1"}
    )
    assert response.status_code == 302
    assert response["Location"] == url("queue", name="default") + "?page=1"
    assert said(response)[0].startswith(f"Cancelled job {job['jid']}.")
    assert [json.loads(m)["jid"] for m in r.lrange("queue:default", 0, -1)] == [other["jid"]]
    assert r.hexists(keys.iteration_state(job["jid"]), "cancelled")
    assert f"cancelled job {job['jid']}" in caplog.text  # audited


def test_a_running_job_is_cancelled_from_the_busy_page(manager: Client, r: Any) -> None:
    identity = add_process(r)  # its busy hash holds one running job
    page = manager.get(url("busy")).content.decode()
    assert ">Cancel</button>" in page
    jid = json.loads(json.loads(next(iter(r.hvals(keys.work(identity)))))["payload"])["jid"]
    response = manager.post(url("job_cancel"), {"jid": jid, "from": "busy"})
    assert response["Location"] == url("busy")
    assert said(response)[0].startswith(f"Cancelled job {jid}.")
    assert r.hexists(keys.iteration_state(jid), "cancelled")


def test_cancelling_a_job_that_has_gone_says_so(manager: Client, r: Any) -> None:
    response = manager.post(url("job_cancel"), {"jid": "finished-long-ago", "from": "busy"})
    assert said(response) == [
        "Job finished-long-ago is no longer waiting or running (it may have finished). It is marked "
        "cancelled, so it will not start if it turns up again."
    ]
    assert "No job named" in said(manager.post(url("job_cancel"), {"from": "busy"}))[0]


@pytest.mark.parametrize(("kind", "key"), [("scheduled", keys.SCHEDULE), ("retries", keys.RETRY)])
def test_scheduled_and_retrying_jobs_are_cancelled_from_their_pages(
    manager: Client, r: Any, kind: str, key: str
) -> None:
    entry = zadd(r, key, failed() if kind == "retries" else payload())
    page = manager.get(url(kind)).content.decode()
    assert 'value="cancel"' in page
    response = manager.post(url("bulk", kind=kind), {"action": "cancel", "key": [entry]})
    assert said(response) == ["1 job cancelled (removed; they never run)."]
    assert r.zcard(key) == 0
    # Again: it has gone, and the page says so.
    response = manager.post(url("bulk", kind=kind), {"action": "cancel", "key": [entry]})
    assert "no longer in" in said(response)[0]


def test_the_dead_set_offers_no_cancel(manager: Client, r: Any) -> None:
    entry = zadd(r, keys.DEAD, failed(), 5.0)
    assert 'value="cancel"' not in manager.get(url("dead")).content.decode()
    response = manager.post(url("bulk", kind="dead"), {"action": "cancel", "key": [entry]})
    assert "Unknown action 'cancel'" in said(response)[0] and r.zcard(keys.DEAD) == 1


HOSTILE_JIDS = [
    "a\x00b",
    "<script>alert(1)</script>",
    "*?[]\\",
    "it-" * 50,
    "é" * 300,
    " ",
    "\n",
    '"},{"class":"x"',
    "x" * 2000,  # longer than any jid: refused with a message, not an error page
]


@pytest.mark.parametrize("jid", HOSTILE_JIDS, ids=range(len(HOSTILE_JIDS)))
def test_hostile_jids_through_the_action(manager: Client, r: Any, jid: str) -> None:
    job = payload(jid=jid)
    r.sadd(keys.QUEUES, "default")
    r.lpush("queue:default", wire.dumps(job).encode("utf-8", "surrogatepass"))
    response = manager.post(url("job_cancel"), {"jid": jid, "from": "queue", "name": "default"})
    assert response.status_code == 302
    (message,) = said(response)
    if len(jid) > 1024:
        assert message.startswith("Could not cancel job") and r.llen("queue:default") == 1
    else:
        assert message.startswith("Cancelled job") and r.llen("queue:default") == 0
    page = manager.get(url("queue", name="default"))
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.content.decode("utf-8", "replace")
