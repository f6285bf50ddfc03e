"""The bad-data corpus against job status: junk in ``status:<jid>`` hashes, as any client may
write them, read through the data API (``JobStatus.get``) and the dashboard's status page.

Every corpus member's bytes go into every field of a status hash (one hash per field), and
keys named ``status:*`` of other types come on top. ``JobStatus.get`` never raises, and
gives plain data; every page answers 200 or 404, never a 500, and shows nothing unescaped.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk
from django_wurk.api import JobStatus
from tests.dashboard.conftest import url
from tests.hostile.corpus import members
from tests.hostile.ledger import report

pytestmark = pytest.mark.django_db

FIELDS = ("state", "class", "queue", "progress", "message", "result", "result_withheld", "error",
          "retry_count", "enqueued_at", "started_at", "finished_at", "at")  # fmt: skip
XSS = b"<script>window.__xss=1</script>"
EXTRA = [XSS, b"\xff\xfe", b"nan", b"-inf", b"1e400", b"9" * 400, b"", b"{", b'"\\ud800"', b"[" * 5000]


def test_every_status_field_survives_the_corpus(r: Any, wurk: Wurk, admin_client: Client) -> None:
    viewer = admin_client
    values = [m.raw for m in members("status", time.time(), flavours=(False,), huge_mb=(1,))] + EXTRA
    problems: dict[str, list[str]] = {"JobStatus.get": [], "status page": []}
    jids = []
    for i, field in enumerate(FIELDS):
        for j, value in enumerate(values):
            jid = f"h{i}-{j}"
            r.hset(
                f"status:{jid}",
                mapping={field: value, "state": "running"} if field != "state" else {field: value},
            )
            jids.append(jid)
    r.rpush("status:as-list", XSS)
    r.set("status:as-string", XSS)
    r.zadd("status:as-zset", {XSS: 1})
    others = ["as-list", "as-string", "as-zset"]
    jids += others
    for jid in jids:
        try:
            status = JobStatus.get(jid)
            json.dumps(None if status is None else status.__dict__)
        except Exception as exc:
            problems["JobStatus.get"].append(f"{jid}: {type(exc).__name__}: {exc}"[:300])
    for jid in [*jids[:: max(1, len(jids) // 120)], *others]:
        response = viewer.get(url("job_status", jid=jid))
        if response.status_code not in (200, 404):
            problems["status page"].append(f"{jid}: HTTP {response.status_code}")
        elif XSS in response.content:
            problems["status page"].append(f"{jid}: unescaped markup")
    assert not any(problems.values()), report(problems)
