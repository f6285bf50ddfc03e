"""Who gets what: every page and every action, with and without each permission.

Anonymous users and non-staff users are sent to the admin login; staff without the needed
permission get 403; pages need ``django_wurk.view_dashboard`` and actions
``django_wurk.manage_jobs``; actions answer POST only and pages GET only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_wurk import Wurk
from django_wurk.core import keys
from tests.dashboard.conftest import add_process, failed, payload, push, url, write_metrics, zadd


@pytest.fixture
def data(wurk: Wurk, r: Any) -> dict[str, str]:
    """One of everything (a paused queue too); returns the entry keys (and the queued job's jid)."""
    queued = payload()
    push(r, queued)
    push(r, payload(queue="held"), queue="held")
    r.sadd(keys.PAUSED, "held")
    write_metrics(r)
    add_process(r)
    return {
        "scheduled": zadd(r, keys.SCHEDULE, payload()),
        "retries": zadd(r, keys.RETRY, failed()),
        "dead": zadd(r, keys.DEAD, failed(), time.time() - 10),
        "queued_jid": queued["jid"],
    }


def pages(entry_keys: dict[str, str]) -> list[str]:
    return [
        url("changelist"),
        url("stats"),
        url("busy"),
        url("queues"),
        url("queue", name="default"),
        url("scheduled"),
        url("retries"),
        url("dead"),
        url("entry", kind="scheduled", key=entry_keys["scheduled"]),
        url("entry", kind="retries", key=entry_keys["retries"]),
        url("entry", kind="dead", key=entry_keys["dead"]),
        url("metrics"),
        url("metrics_class", name="app.jobs.Hello"),
    ]


def actions(entry_keys: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (url("busy_signal"), {"signal": "quiet", "identity": "*"}),
        (url("job_cancel"), {"jid": entry_keys["queued_jid"], "from": "queue", "name": "default"}),
        (url("queue_delete"), {"name": "default", "digest": "0" * 32, "position": "0"}),
        (url("queue_clear"), {"name": "default", "confirm": "yes"}),
        (url("queue_pause"), {"name": "default", "next": url("queues")}),
        (url("queue_unpause"), {"name": "held", "next": url("queues")}),
        (url("bulk", kind="retries"), {"action": "delete", "key": [entry_keys["retries"]]}),
        (url("bulk", kind="dead"), {"action": "delete", "key": [entry_keys["dead"]]}),
        (url("all", kind="scheduled"), {"action": "delete_all", "confirm": "yes"}),
    ]


def snapshot(r: Any) -> tuple[Any, ...]:
    return (
        r.llen("queue:default"),
        r.zcard(keys.SCHEDULE),
        r.zcard(keys.RETRY),
        r.zcard(keys.DEAD),
        r.llen("web1:123:abcdef012345-signals"),
        r.smembers(keys.PAUSED),
    )


def test_anonymous_users_are_sent_to_the_admin_login(client: Client, data: dict[str, str], r: Any) -> None:
    before = snapshot(r)
    for page in pages(data):
        response = client.get(page)
        assert response.status_code == 302, page
        assert response["Location"].startswith("/admin/login/?next="), page
    for action, form in actions(data):
        response = client.post(action, form)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), action
    assert snapshot(r) == before


def test_non_staff_users_are_sent_to_the_login_even_with_the_permissions(
    login: Callable[..., Client], data: dict[str, str], r: Any
) -> None:
    client = login("view", "manage", staff=False)
    before = snapshot(r)
    for page in pages(data):
        assert client.get(page).status_code == 302, page
    for action, form in actions(data):
        assert client.post(action, form).status_code == 302, action
    assert snapshot(r) == before


def test_staff_without_the_view_permission_get_403_on_every_page(
    login: Callable[..., Client], data: dict[str, str]
) -> None:
    for client in (login(), login("manage")):
        for page in pages(data):
            response = client.get(page)
            assert response.status_code == 403, page
            if page != url("stats"):
                text = response.content.decode()
                assert "django_wurk.view_dashboard" in text
                assert "wurk-tab" not in text  # no tabs, no set sizes for them


def test_the_view_permission_opens_every_page_and_no_action(
    viewer: Client, data: dict[str, str], r: Any
) -> None:
    for page in pages(data):
        response = viewer.get(page)
        assert response.status_code == 200, page
    # Pages show no action buttons without manage_jobs.
    for page in (url("busy"), url("queues"), url("retries"), url("entry", kind="dead", key=data["dead"])):
        text = viewer.get(page).content.decode()
        assert '<form method="post"' not in text.replace("logout-form", ""), page
        assert "Retry now" not in text and ">Quiet<" not in text and ">Clear<" not in text
        assert ">Pause<" not in text and ">Unpause<" not in text
    before = snapshot(r)
    for action, form in actions(data):
        response = viewer.post(action, form)
        assert response.status_code == 403, action
        assert "django_wurk.manage_jobs" in response.content.decode()
    assert snapshot(r) == before


def test_the_manage_permission_alone_allows_actions_but_not_pages(
    login: Callable[..., Client], data: dict[str, str], r: Any
) -> None:
    client = login("manage")
    assert client.get(url("dead")).status_code == 403
    response = client.post(url("bulk", kind="dead"), {"action": "delete", "key": [data["dead"]]})
    assert response.status_code == 302 and r.zcard(keys.DEAD) == 0


def test_a_superuser_has_both_permissions(login: Callable[..., Client], data: dict[str, str], r: Any) -> None:
    client = login(superuser=True)
    for page in pages(data):
        assert client.get(page).status_code == 200, page
    assert "Retry now" in client.get(url("retries")).content.decode()
    assert (
        client.post(url("bulk", kind="dead"), {"action": "delete", "key": [data["dead"]]}).status_code == 302
    )
    assert r.zcard(keys.DEAD) == 0


def test_with_both_permissions_every_action_works(manager: Client, data: dict[str, str], r: Any) -> None:
    for action, form in actions(data):
        response = manager.post(action, form)
        assert response.status_code == 302, (action, response.content[:500])
    assert r.llen("queue:default") == 0  # cleared
    assert r.smembers(keys.PAUSED) == {b"default"}  # "default" paused, "held" unpaused
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 0 and r.zcard(keys.SCHEDULE) == 0
    assert r.lrange("web1:123:abcdef012345-signals", 0, -1) == [b"TSTP"]


def test_pages_refuse_posts_and_actions_refuse_gets(manager: Client, data: dict[str, str], r: Any) -> None:
    for page in pages(data):
        assert manager.post(page).status_code == 405, page
    before = snapshot(r)
    for action, _ in actions(data):
        response = manager.get(action)
        assert response.status_code == 405, action
        assert response["Allow"] == "POST"
    assert snapshot(r) == before


def test_actions_need_the_csrf_token(login: Callable[..., Client], data: dict[str, str], r: Any) -> None:
    from django.contrib.auth.models import User

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(User.objects.create_superuser("strict", password="pw"))
    before = snapshot(r)
    for action, form in actions(data):
        assert strict.post(action, form).status_code == 403, action
    assert snapshot(r) == before
    # With the token from the page's form, the same post goes through.
    page = strict.get(url("retries"))
    token = page.cookies["csrftoken"].value
    response = strict.post(
        url("bulk", kind="retries"),
        {"action": "delete", "key": [data["retries"]], "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302 and r.zcard(keys.RETRY) == 0


def test_the_admin_index_lists_wurk_only_for_those_who_may_see_it(
    login: Callable[..., Client], data: dict[str, str]
) -> None:
    viewer = login("view")
    index = viewer.get("/admin/").content.decode()
    assert "Wurk" in index and url("changelist") in index
    app = viewer.get("/admin/django_wurk/")
    assert app.status_code == 200 and url("changelist") in app.content.decode()
    assert url("changelist") not in login().get("/admin/").content.decode()


def test_permissions_exist_with_readable_names(db: None) -> None:
    from django.contrib.auth.models import Permission

    perms = {
        p.codename: p.name
        for p in Permission.objects.filter(
            content_type__app_label="django_wurk", content_type__model="dashboard"
        )
    }
    assert perms == {
        "view_dashboard": "Can view the Wurk dashboard",
        "manage_jobs": "Can retry, delete and kill jobs, clear queues and quiet or stop processes",
    }
