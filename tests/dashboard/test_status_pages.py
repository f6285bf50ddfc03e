"""A tracked job's status page: state, progress, result, error; escaped; permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk
from tests.dashboard.conftest import url

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"


def test_the_page_shows_a_status_and_escapes_every_field(viewer: Client, r: Any) -> None:
    r.hset("status:j1", mapping={"state": "succeeded", "class": XSS, "queue": XSS, "progress": "42.0",
                                 "message": XSS, "error": XSS, "result": '{"html": "<b>x</b>"}',
                                 "enqueued_at": "1767225600.0", "retry_count": "2"})  # fmt: skip
    r.expire("status:j1", 600)
    response = viewer.get(url("job_status", jid="j1"))
    assert response.status_code == 200
    text = response.content.decode()
    assert XSS not in text and "&lt;script&gt;" in text
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
    assert 'value="42"' in text and "succeeded" in text


def test_a_missing_or_hostile_status_is_answered_plainly(viewer: Client, r: Any) -> None:
    response = viewer.get(url("job_status", jid="nope"))
    assert response.status_code == 404 and "track=True" in response.content.decode()
    r.rpush("status:list", "x")  # not a hash
    assert viewer.get(url("job_status", jid="list")).status_code == 404
    r.hset(
        "status:bad", mapping={"state": b"\xff", "progress": "inf", "result": "{", "started_at": "9" * 400}
    )
    response = viewer.get(url("job_status", jid="bad"))
    assert response.status_code == 200 and "unreadable" in response.content.decode()
    odd = "a/b\n<c>"
    r.hset(f"status:{odd}", "state", "running")
    assert viewer.get(url("job_status", jid=odd)).status_code == 200


def test_only_those_who_may_view_the_dashboard_see_it(
    login: Callable[..., Client], r: Any, wurk: Wurk
) -> None:
    r.hset("status:j2", "state", "running")
    assert login().get(url("job_status", jid="j2")).status_code == 403
    assert login("manage").get(url("job_status", jid="j2")).status_code == 403
    assert login("view").get(url("job_status", jid="j2")).status_code == 200
    assert Client().get(url("job_status", jid="j2")).status_code == 302


def test_a_tracked_job_in_the_retry_set_links_to_its_status(viewer: Client, r: Any) -> None:
    import json

    from tests.dashboard.conftest import payload

    tracked, plain = payload(track=True, jid="a" * 24), payload(jid="b" * 24)
    r.zadd("retry", {json.dumps(tracked): 1767225600.5, json.dumps(plain): 1767225601.5})
    status_url = url("job_status", jid="a" * 24)
    assert (
        status_url
        in viewer.get(url("entry", kind="retries", key=f"1767225600.5-{'a' * 24}")).content.decode()
    )
    assert (
        "/status/"
        not in viewer.get(url("entry", kind="retries", key=f"1767225601.5-{'b' * 24}")).content.decode()
    )
