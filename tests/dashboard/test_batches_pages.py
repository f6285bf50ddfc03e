"""The Batches tab: list, search and paging, dead batches, a batch's page, its JSON, cancelling.

Same rules as every dashboard page: permissions, POST + CSRF for the action, job data
and descriptions escaped, a missing batch answered plainly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_wurk import Batch, BatchStatus, Wurk
from django_wurk.core.features.batches.script import run
from tests.dashboard.conftest import url
from tests.jobsapp import batch_jobs
from tests.jobsapp.batch_jobs import Recorder

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"


@pytest.fixture(autouse=True)
def immediate(wurk: Wurk, use_app_settings: Any) -> None:
    """Each test runs inside a transaction that is never committed: batches are written at once."""
    use_app_settings(enqueue="immediate")


def make_batch(description: str = "", jobs: int = 2, **options: Any) -> Batch:
    batch = Batch(description=description, **options)
    with batch.jobs():
        for i in range(jobs):
            batch_jobs.work.set(queue="nobody-listens").perform_async(i)
    return batch


def jids_of(r: Any, bid: str) -> list[str]:
    return [
        p["jid"] for p in (json.loads(x) for x in r.lrange("queue:nobody-listens", 0, -1)) if p["bid"] == bid
    ]


def test_the_tab_lists_batches_newest_first_with_paging(viewer: Client, r: Any) -> None:
    bids = [make_batch(f"import {i}").bid for i in range(30)]
    page = viewer.get(url("batches")).content.decode()
    assert 'data-tab="batches"' in page and ">Batches" in page
    assert page.index(bids[-1]) < page.index(bids[-2]) and bids[0] not in page  # 25 per page
    assert "1\u201325 of 30" in page
    second = viewer.get(url("batches") + "?page=2").content.decode()
    assert bids[0] in second and bids[-1] not in second


def test_search_by_description_or_bid(viewer: Client, r: Any) -> None:
    wanted = make_batch("Import 2026-01")
    other = make_batch("Export")
    page = viewer.get(url("batches"), {"q": "import 2026"}).content.decode()
    assert wanted.bid in page and other.bid not in page and "1 match for" in page
    page = viewer.get(url("batches"), {"q": other.bid}).content.decode()
    assert other.bid in page and wanted.bid not in page
    assert "Nothing matches." in viewer.get(url("batches"), {"q": "nothing like it"}).content.decode()


def test_dead_batches_lists_only_batches_with_dead_jobs(viewer: Client, r: Any, wurk: Wurk) -> None:
    healthy = make_batch("healthy")
    sick = make_batch("sick")
    run(wurk, "death", sick.bid, jids_of(r, sick.bid)[0])
    page = viewer.get(url("batches_dead")).content.decode()
    assert sick.bid in page and healthy.bid not in page
    assert "No batch has dead jobs." not in page


def test_a_batchs_page_shows_progress_counts_callbacks_failures_and_children(
    viewer: Client, r: Any, wurk: Wurk
) -> None:
    parent = Batch(description="orders")
    parent.on("complete", Recorder, {"to": "ops"})
    parent.on("success", Recorder)
    with parent.jobs():
        for i in range(4):
            batch_jobs.work.set(queue="nobody-listens").perform_async(i)
        child = Batch(description="child")
        with child.jobs():
            batch_jobs.work.set(queue="nobody-listens").perform_async(9)
    a, b, c, _ = jids_of(r, parent.bid)
    run(wurk, "success", parent.bid, a)
    run(wurk, "failed", parent.bid, b)
    run(wurk, "failed", parent.bid, c)
    run(wurk, "death", parent.bid, c)
    page = viewer.get(url("batch", bid=parent.bid)).content.decode()
    assert "orders" in page and 'role="progressbar"' in page
    assert 'data-part="wurk-bar-succeeded" style="width: 25.00%"' in page
    assert 'data-part="wurk-bar-failing" style="width: 25.00%"' in page
    assert 'data-part="wurk-bar-dead" style="width: 25.00%"' in page
    assert (
        'data-stat="total">4<' in page
        and 'data-stat="pending">3<' in page
        and 'data-stat="failures">2<' in page
    )
    # Unfinished: what the bar has not finished (1 failing, 1 waiting), beside Sidekiq's
    # pending (3: the dead job counts), so "75% finished" never sits beside a count of 3.
    assert 'data-stat="unfinished">2<' in page and "dead ones included" in page
    assert "tests.jobsapp.batch_jobs.Recorder" in page and "&quot;to&quot;: &quot;ops&quot;" in page
    assert page.count("not yet</span>") == 2  # neither callback fired
    assert url("batch_job", bid=parent.bid, jid=b) in page and url("batch_job", bid=parent.bid, jid=c) in page
    assert child.bid in page and url("batch", bid=child.bid) in page
    child_page = viewer.get(url("batch", bid=child.bid)).content.decode()
    assert url("batch", bid=parent.bid) in child_page  # a link up to the parent
    data = viewer.get(url("batch_status", bid=parent.bid)).json()
    assert data["total"] == 4 and data["pending"] == 3 and data["progress"]["dead"] == 1
    assert data["progress"]["unfinished"] == 2
    assert (
        data["progress"]["succeeded"] == 1
        and data["progress"]["failing"] == 1
        and data["progress"]["waiting"] == 1
    )


def test_a_failed_or_dead_jid_links_to_its_entry(viewer: Client, r: Any, wurk: Wurk) -> None:
    batch = make_batch(jobs=1)
    [jid] = jids_of(r, batch.bid)
    member = json.dumps({"class": "x", "args": [], "jid": jid, "queue": "default", "bid": batch.bid})
    r.zadd("dead", {member: 1234.5})
    response = viewer.get(url("batch_job", bid=batch.bid, jid=jid))
    assert response.status_code == 302 and response["Location"] == url(
        "entry", kind="dead", key=f"1234.5-{jid}"
    )
    r.delete("dead")
    response = viewer.get(url("batch_job", bid=batch.bid, jid=jid), follow=True)
    assert "no longer in the retry set or the dead set" in response.content.decode()


def test_a_missing_batch_is_answered_plainly(viewer: Client, r: Any) -> None:
    response = viewer.get(url("batch", bid="gonegonegone"))
    assert response.status_code == 404 and "it was never written, or it expired" in response.content.decode()
    assert viewer.get(url("batch_status", bid="gonegonegone")).status_code == 404
    assert viewer.get("/admin/django_wurk/dashboard/batches/b%3Cx%3E/").status_code == 404


def test_descriptions_and_options_are_escaped(viewer: Client, r: Any) -> None:
    batch = Batch(description=XSS)
    batch.on("complete", Recorder, {"html": XSS})
    with batch.jobs():
        batch_jobs.work.set(queue="nobody-listens").perform_async(1)
    for page in (url("batches"), url("batch", bid=batch.bid), url("batches") + "?q=script"):
        text = viewer.get(page).content.decode()
        assert XSS not in text and "&lt;script&gt;" in text


def test_permissions_and_csrf(login: Callable[..., Client], wurk: Wurk, r: Any, client: Client) -> None:
    batch = make_batch()
    pages = [
        url("batches"),
        url("batches_dead"),
        url("batch", bid=batch.bid),
        url("batch_status", bid=batch.bid),
    ]
    for page in pages:
        assert client.get(page).status_code == 302  # anonymous: to the login
        assert login().get(page).status_code == 403  # staff without the view permission
    viewer = login("view")
    assert all(viewer.get(page).status_code == 200 for page in pages)
    assert "Cancel batch" not in viewer.get(url("batch", bid=batch.bid)).content.decode()
    assert viewer.post(url("batch_cancel"), {"bid": batch.bid}).status_code == 403
    assert viewer.post(url("batch", bid=batch.bid)).status_code == 405
    manager = login("view", "manage")
    assert manager.get(url("batch_cancel")).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(User.objects.get(pk=manager.session["_auth_user_id"]))
    assert strict.post(url("batch_cancel"), {"bid": batch.bid}).status_code == 403
    assert not BatchStatus(batch.bid).invalidated


def test_cancel_batch_marks_it_invalid_and_is_audited(manager: Client, r: Any) -> None:
    batch = make_batch()
    page = manager.get(url("batch", bid=batch.bid)).content.decode()
    assert "Cancel batch" in page
    response = manager.post(url("batch_cancel"), {"bid": batch.bid}, follow=True)
    assert response.redirect_chain[-1][0] == url("batch", bid=batch.bid)
    text = response.content.decode()
    assert "is cancelled" in text and "cancelled</span>" in text and "Cancel batch" not in text
    assert BatchStatus(batch.bid).invalidated and not Batch(bid=batch.bid).valid()
    from django.contrib.admin.models import LogEntry

    assert LogEntry.objects.filter(object_repr=f"invalidated batch {batch.bid}").exists()
    response = manager.post(url("batch_cancel"), {"bid": "gonegonegone"}, follow=True)
    assert "no longer exists" in response.content.decode()
    response = manager.post(url("batch_cancel"), {"bid": "<bad>"}, follow=True)
    assert "No batch named in the request." in response.content.decode()


def test_expired_index_entries_show_as_expired(viewer: Client, r: Any) -> None:
    r.zadd("batches", {"expiredbatch01": time.time()})
    page = viewer.get(url("batches")).content.decode()
    assert "expiredbatch01" in page and ">expired<" in page


def test_search_reads_a_bounded_part_of_the_index_but_finds_any_whole_bid(
    viewer: Client, r: Any, wurk: Wurk, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_wurk.dashboard.views import batches as views

    old = make_batch("needle in the haystack")
    for i in range(5):
        make_batch(f"hay {i}")
    monkeypatch.setattr(views, "SEARCH_SCAN", 3)
    page = viewer.get(url("batches"), {"q": "needle"}).content.decode()
    assert old.bid not in page and "newest 3 batches" in page  # beyond the scanned window
    page = viewer.get(url("batches"), {"q": old.bid}).content.decode()
    assert url("batch", bid=old.bid) in page and "1 match for" in page
