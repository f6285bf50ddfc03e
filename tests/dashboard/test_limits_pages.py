"""The Limits tab: every limiter with its use now, searchable, paged, read-only, escaped."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk, limiter
from tests.dashboard.conftest import url

pytestmark = pytest.mark.django_db


def test_the_limits_tab_lists_each_limiter_with_its_use(viewer: Client, wurk: Wurk) -> None:
    erp = limiter.concurrent("erp", 4)
    assert erp.acquire("a").admitted and erp.acquire("b").admitted
    api = limiter.bucket("github:acme", 2, "hour")
    api.attempt()
    api.attempt()
    limiter.window("quiet", 5, 60).attempt()
    page = viewer.get(url("limits")).content.decode()
    assert 'data-tab="limits"' in page and ">Limits" in page
    assert (
        page.index('data-limiter="erp"')
        < page.index('data-limiter="github:acme"')
        < page.index('data-limiter="quiet"')
    )
    assert 'aria-valuenow="50.00"' in page  # erp: 2 of 4
    assert 'aria-valuenow="100.00"' in page and "wurk-bar-dead" in page  # the bucket is full
    assert "lock_timeout=30.0" in page
    found = viewer.get(url("limits"), {"q": "GITHUB"}).content.decode()
    assert 'data-limiter="github:acme"' in found and 'data-limiter="erp"' not in found


def test_an_empty_limits_tab_says_so(viewer: Client, wurk: Wurk) -> None:
    assert "No rate limiters yet" in viewer.get(url("limits")).content.decode()


def test_the_limits_tab_pages(viewer: Client, wurk: Wurk) -> None:
    for i in range(30):
        limiter.window(f"tenant-{i:02d}", 1, 60).attempt()
    first = viewer.get(url("limits")).content.decode()
    second = viewer.get(url("limits"), {"page": 2}).content.decode()
    assert first.count("data-limiter=") == 25 and second.count("data-limiter=") == 5
    assert 'data-limiter="tenant-29"' in second


def test_hostile_limiter_keys_render_escaped_and_never_fail(viewer: Client, wurk: Wurk, r: Any) -> None:
    xss = "<script>window.__xss=1</script>"
    r.sadd("lmtr-list", xss, b"\xff\xfe", "no-meta", "wrong-meta", "bad-json", "bad-options", "wrong-state")
    r.hset(f"lmtr:{xss}", mapping={"type": xss, "options": '{"a": "' + xss + '"}'})
    r.hset(b"lmtr:\xff\xfe", mapping={"type": "window", "options": '{"count": 1, "seconds": 60}'})
    r.set("lmtr:wrong-meta", "string")
    r.hset("lmtr:bad-json", mapping={"type": "window", "options": b"\xff{"})
    r.hset("lmtr:bad-options", mapping={"type": "leaky", "options": '{"size": -1, "drain": "x"}'})
    r.hset("lmtr:wrong-state", mapping={"type": "window", "options": '{"count": 1, "seconds": 60}'})
    r.set("lmtr-w:wrong-state", "junk")
    response = viewer.get(url("limits"))
    assert response.status_code == 200
    page = response.content.decode()
    assert xss not in page and "&lt;script&gt;" in page
    assert page.count("data-limiter=") == 7
    assert "not UTF-8" in page and "not a hash" in page and "expired" in page
    assert "holds a string" in page
    r.delete("lmtr-list")
    r.set("lmtr-list", "not a set")
    assert viewer.get(url("limits")).status_code == 200


def test_the_limits_tab_needs_the_view_permission(login: Any, wurk: Wurk) -> None:
    assert login().get(url("limits")).status_code == 403
