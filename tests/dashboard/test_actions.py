"""Every action: what it does in Redis, what it says, and what it says when the job has gone."""

from __future__ import annotations

import html
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import Client

from django_wurk import Wurk
from django_wurk.conf import Settings
from django_wurk.core import keys, wire
from django_wurk.core.api import DeadSet
from django_wurk.dashboard.views.queues import digest
from tests.dashboard.conftest import add_process, failed, payload, push, url, zadd


def said(response: HttpResponse) -> list[str]:
    """The messages this request added (earlier ones wait in the session for a page to show them)."""
    storage = get_messages(response.wsgi_request)  # type: ignore[attr-defined]
    return [str(m) for m in storage._queued_messages]


def members(r: Any, key: str) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange(key, 0, -1)]


def row(page: str, queue: str) -> str:
    """One queue's row of the queues list."""
    start = page.index(f'data-queue="{html.escape(queue)}"')
    return page[start : page.index("</tr>", start)]


# Busy ---------------------------------------------------------------------------------


def test_quiet_and_stop_one_process(manager: Client, r: Any) -> None:
    first = add_process(r, "a:1:000000000001")
    second = add_process(r, "b:2:000000000002")
    response = manager.post(url("busy_signal"), {"signal": "quiet", "identity": first})
    assert response.status_code == 302 and response["Location"] == url("busy")
    assert said(response) == [f"Process {first} quieted. It acts on its next heartbeat."]
    assert r.lrange(keys.signals(first), 0, -1) == [b"TSTP"] and r.llen(keys.signals(second)) == 0
    assert 0 < r.ttl(keys.signals(first)) <= 60
    manager.post(url("busy_signal"), {"signal": "stop", "identity": second})
    assert r.lrange(keys.signals(second), 0, -1) == [b"TERM"]


def test_quiet_and_stop_all_processes_skip_embedded_ones(manager: Client, r: Any) -> None:
    plain = add_process(r, "a:1:000000000001")
    embedded = add_process(r, "b:2:000000000002", embedded=True)
    response = manager.post(url("busy_signal"), {"signal": "stop", "identity": "*"})
    assert said(response) == ["1 process told to stop. It acts on its next heartbeat."]
    assert r.lrange(keys.signals(plain), 0, -1) == [b"TERM"] and r.llen(keys.signals(embedded)) == 0
    response = manager.post(url("busy_signal"), {"signal": "quiet", "identity": embedded})
    assert "embedded and cannot be signalled" in said(response)[0]
    # The busy page offers no buttons for an embedded process.
    page = manager.get(url("busy")).content.decode()
    row = page[page.index(f'data-identity="{embedded}"') :]
    row = row[: row.index("</tr>")]
    assert "Quiet" not in row and "embedded" in row


def test_signalling_a_process_that_has_gone_says_so(manager: Client, r: Any, wurk: Wurk) -> None:
    response = manager.post(url("busy_signal"), {"signal": "quiet", "identity": "gone:1:abc"})
    assert said(response) == ["Process gone:1:abc is no longer running."]
    assert r.llen(keys.signals("gone:1:abc")) == 0
    assert said(manager.post(url("busy_signal"), {"signal": "quiet", "identity": "*"})) == [
        "There are no processes to signal."
    ]
    assert "Unknown request" in said(manager.post(url("busy_signal"), {"signal": "kill", "identity": "*"}))[0]


# Queues -------------------------------------------------------------------------------


def test_delete_one_job_from_a_queue(manager: Client, r: Any, wurk: Wurk) -> None:
    raws = [push(r, payload(args=[i])) for i in range(5)]
    target = raws[2]
    response = manager.post(
        url("queue_delete"), {"name": "default", "digest": digest(target), "position": "2", "next": "?page=1"}
    )
    assert response["Location"] == url("queue", name="default") + "?page=1"
    assert "Deleted app.jobs.Hello job" in said(response)[0]
    assert target not in r.lrange("queue:default", 0, -1) and r.llen("queue:default") == 4
    # Gone: deleting it again says so and removes nothing.
    again = manager.post(url("queue_delete"), {"name": "default", "digest": digest(target), "position": "2"})
    assert said(again) == ["That job is no longer in queue “default” (it may have run already)."]
    assert r.llen("queue:default") == 4


def test_delete_finds_a_job_that_moved_far_from_where_it_was_shown(
    manager: Client, r: Any, wurk: Wurk
) -> None:
    target = push(r, payload(args=["target"]))
    for i in range(300):
        push(r, payload(args=[i]))
    manager.post(url("queue_delete"), {"name": "default", "digest": digest(target), "position": "0"})
    assert target not in r.lrange("queue:default", 0, -1) and r.llen("queue:default") == 300


def test_delete_finds_a_job_several_reads_away(manager: Client, r: Any, wurk: Wurk) -> None:
    """The search reads the queue's bytes a thousand at a time: a job past the first reads,
    and an unreadable one, is still found, and only it is removed."""
    target = push(r, payload(args=["target"]))
    r.lpush("queue:default", b"\xff garbage")
    pipe = r.pipeline(transaction=False)
    for i in range(2500):
        pipe.lpush("queue:default", wire.dumps(payload(args=[i])))
    pipe.execute()
    for wanted in (target, b"\xff garbage"):
        response = manager.post(
            url("queue_delete"), {"name": "default", "digest": digest(wanted), "position": "0"}
        )
        assert said(response)[0].startswith("Deleted ")
    jobs = r.lrange("queue:default", 0, -1)
    assert len(jobs) == 2500 and target not in jobs and b"\xff garbage" not in jobs


def test_delete_an_unreadable_job_from_a_queue(manager: Client, r: Any, wurk: Wurk) -> None:
    r.sadd(keys.QUEUES, "default")
    r.lpush("queue:default", b"\xff garbage")
    page = manager.get(url("queue", name="default")).content.decode()
    assert "(unreadable payload)" in page and "not valid UTF-8" in page
    manager.post(url("queue_delete"), {"name": "default", "digest": digest(b"\xff garbage"), "position": "0"})
    assert r.llen("queue:default") == 0


def test_clear_a_queue_asks_first(manager: Client, r: Any, wurk: Wurk) -> None:
    for i in range(3):
        push(r, payload(args=[i]), queue="mail")
    confirm = manager.post(url("queue_clear"), {"name": "mail"})
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "Delete all 3 jobs in queue “mail”?" in text and 'name="confirm" value="yes"' in text
    assert r.llen("queue:mail") == 3
    done = manager.post(url("queue_clear"), {"name": "mail", "confirm": "yes"})
    assert done["Location"] == url("queues")
    assert said(done) == ["Cleared queue “mail”: 3 jobs deleted."]
    assert r.llen("queue:mail") == 0 and not r.sismember(keys.QUEUES, "mail")


def test_pause_a_queue_from_the_list(
    manager: Client, r: Any, wurk: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(2):
        push(r, payload(args=[i]), queue="mail")
    push(r, payload())
    before = manager.get(url("queues")).content.decode()
    assert ">Pause<" in row(before, "mail") and "Unpause" not in row(before, "mail")
    with caplog.at_level(logging.INFO, logger="django_wurk.dashboard"):
        response = manager.post(url("queue_pause"), {"name": "mail", "next": url("queues")})
    assert response.status_code == 302 and response["Location"] == url("queues")
    assert said(response) == ["Paused queue “mail”: workers stop fetching from it; jobs stay queued."]
    assert r.smembers(keys.PAUSED) == {b"mail"} and r.llen("queue:mail") == 2
    assert any(m.endswith(" paused queue mail") for m in caplog.messages)
    page = manager.get(url("queues")).content.decode()
    mail, default = row(page, "mail"), row(page, "default")
    assert '<span class="wurk-badge wurk-badge-warn">paused</span>' in mail
    assert ">Unpause<" in mail and ">Pause<" not in mail and url("queue_unpause") in mail
    assert "paused</span>" not in default and ">Pause<" in default
    # Its own page shows the badge and offers Unpause, and still lists the jobs.
    detail = manager.get(url("queue", name="mail")).content.decode()
    assert 'wurk-badge-warn">paused</span>' in detail and ">Unpause queue<" in detail
    assert ">Pause queue<" not in detail and detail.count("app.jobs.Hello") == 2


def test_unpause_a_queue_from_its_page(
    manager: Client, r: Any, wurk: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    push(r, payload(), queue="mail")
    r.sadd(keys.PAUSED, "mail", "other")
    here = url("queue", name="mail") + "?page=1&order=oldest"
    with caplog.at_level(logging.INFO, logger="django_wurk.dashboard"):
        response = manager.post(url("queue_unpause"), {"name": "mail", "next": here})
    assert response["Location"] == here
    assert said(response) == ["Unpaused queue “mail”: workers fetch from it again."]
    assert r.smembers(keys.PAUSED) == {b"other"} and r.llen("queue:mail") == 1
    assert any(m.endswith(" unpaused queue mail") for m in caplog.messages)
    detail = manager.get(url("queue", name="mail")).content.decode()
    assert "paused</span>" not in detail and ">Pause queue<" in detail and ">Unpause queue<" not in detail
    assert "paused</span>" not in row(manager.get(url("queues")).content.decode(), "mail")


def test_an_empty_queue_can_be_paused_from_its_page(manager: Client, r: Any, wurk: Wurk) -> None:
    r.sadd(keys.QUEUES, "quiet")
    detail = manager.get(url("queue", name="quiet")).content.decode()
    assert ">Pause queue<" in detail and "Clear queue" not in detail
    manager.post(url("queue_pause"), {"name": "quiet", "next": url("queue", name="quiet")})
    assert r.sismember(keys.PAUSED, "quiet")


def test_pausing_a_paused_queue_and_unpausing_a_running_one_say_so(
    manager: Client, r: Any, wurk: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    push(r, payload(), queue="mail")
    manager.post(url("queue_pause"), {"name": "mail"})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="django_wurk.dashboard"):
        again = manager.post(url("queue_pause"), {"name": "mail"})
        assert said(again) == ["Queue “mail” was already paused."]
        assert r.smembers(keys.PAUSED) == {b"mail"}
        manager.post(url("queue_unpause"), {"name": "mail"})
        caplog.clear()
        running = manager.post(url("queue_unpause"), {"name": "mail"})
    assert said(running) == ["Queue “mail” was not paused."]
    assert r.smembers(keys.PAUSED) == set() and r.llen("queue:mail") == 1
    assert caplog.messages == []  # nothing changed, nothing to audit
    assert running["Location"] == url("queues")  # no next: the queues list


def test_pause_and_unpause_need_a_queue_name(manager: Client, r: Any, wurk: Wurk) -> None:
    for action in ("queue_pause", "queue_unpause"):
        response = manager.post(url(action), {"name": "", "next": url("queues")})
        assert response["Location"] == url("queues")
        assert said(response) == ["No queue named in the request."]
    assert not r.exists(keys.PAUSED)


def test_pause_goes_back_only_to_the_queues_list_or_that_queues_page(
    manager: Client, r: Any, wurk: Wurk
) -> None:
    push(r, payload(), queue="mail")
    for foreign in (
        "https://evil.example/",
        "//evil.example/admin/django_wurk/dashboard/queues/",
        "https://evil.example" + url("queues"),
        "/\\evil.example/",
        url("retries"),
        url("queue", name="other"),
        url("queues") + "../../login/",
    ):
        response = manager.post(url("queue_pause"), {"name": "mail", "next": foreign})
        assert response["Location"] == url("queues"), foreign
    assert r.smembers(keys.PAUSED) == {b"mail"}


def test_pause_and_unpause_come_back_to_a_queue_page_with_an_awkward_name(
    manager: Client, r: Any, wurk: Wurk
) -> None:
    name = "a/b c;=é?"
    push(r, payload(), queue=name)
    for action, button in (("queue_pause", "Pause queue"), ("queue_unpause", "Unpause queue")):
        page = manager.get(url("queue", name=name) + "?order=oldest").content.decode()
        form = page[page.index(url(action)) :]
        assert f">{button}<" in form[: form.index("</form>")]
        [back] = re.findall(r'name="next" value="([^"]*)"', form[: form.index("</form>")])
        response = manager.post(url(action), {"name": name, "next": html.unescape(back)})
        assert response["Location"] == url("queue", name=name) + "?order=oldest", back
    assert not r.exists(keys.PAUSED)


def test_read_only_refuses_pause_and_unpause_and_hides_their_buttons(
    manager: Client, r: Any, wurk: Wurk, use_app_settings: Callable[..., Settings]
) -> None:
    push(r, payload(), queue="mail")
    push(r, payload())
    r.sadd(keys.PAUSED, "mail")
    use_app_settings(dashboard_read_only=True)
    for page in (url("queues"), url("queue", name="mail"), url("queue", name="default")):
        body = manager.get(page).content.decode()
        assert not re.search(r">(Pause|Unpause)( queue)?</button>", body), page
        assert url("queue_pause") not in body and url("queue_unpause") not in body, page
    assert "paused</span>" in row(manager.get(url("queues")).content.decode(), "mail")  # still shown
    for action, name in (("queue_pause", "default"), ("queue_unpause", "mail")):
        response = manager.post(url(action), {"name": name, "next": url("queues")})
        assert response.status_code == 403 and "read-only" in response.content.decode()
    assert r.smembers(keys.PAUSED) == {b"mail"}


# Sorted sets: one entry ---------------------------------------------------------------


def test_retry_now_from_the_retry_set(manager: Client, r: Any, wurk: Wurk) -> None:
    job = failed(retry_count=3)
    key = zadd(r, keys.RETRY, job)
    response = manager.post(url("bulk", kind="retries"), {"action": "retry", "key": [key]})
    assert response["Location"] == url("retries")
    assert said(response) == ["1 job retried."]
    assert r.zcard(keys.RETRY) == 0
    [raw] = r.lrange("queue:default", 0, -1)
    pushed = wire.loads(raw)
    assert (
        pushed["jid"] == job["jid"]
        and pushed["retry_count"] == 2
        and pushed["enqueued_at"] > job["enqueued_at"]
    )


def test_retry_now_from_the_dead_set(manager: Client, r: Any, wurk: Wurk) -> None:
    job = failed(retry_count=25)
    key = zadd(r, keys.DEAD, job, time.time() - 5)
    manager.post(url("bulk", kind="dead"), {"action": "retry", "key": [key]})
    assert r.zcard(keys.DEAD) == 0 and wire.loads(r.lindex("queue:default", 0))["retry_count"] == 24


def test_add_a_scheduled_job_to_its_queue_now(manager: Client, r: Any, wurk: Wurk) -> None:
    job = payload(queue="mail")
    key = zadd(r, keys.SCHEDULE, job, time.time() + 3600)
    response = manager.post(url("bulk", kind="scheduled"), {"action": "add_to_queue", "key": [key]})
    assert said(response) == ["1 job added to its queue."]
    assert r.zcard(keys.SCHEDULE) == 0 and wire.loads(r.lindex("queue:mail", 0))["jid"] == job["jid"]


def test_kill_moves_a_retry_to_the_dead_set(manager: Client, r: Any, wurk: Wurk) -> None:
    deaths: list[Any] = []
    wurk.death_handlers.append(lambda p, e: deaths.append((p["jid"], str(e))))
    job = failed()
    key = zadd(r, keys.RETRY, job)
    response = manager.post(url("bulk", kind="retries"), {"action": "kill", "key": [key]})
    assert said(response) == ["1 job killed (moved to the dead set)."]
    assert r.zcard(keys.RETRY) == 0 and [m["jid"] for m in members(r, keys.DEAD)] == [job["jid"]]
    assert deaths == [(job["jid"], "Job killed by API")]


def test_kill_moves_a_scheduled_job_to_the_dead_set(manager: Client, r: Any, wurk: Wurk) -> None:
    key = zadd(r, keys.SCHEDULE, payload())
    manager.post(url("bulk", kind="scheduled"), {"action": "kill", "key": [key]})
    assert r.zcard(keys.SCHEDULE) == 0 and r.zcard(keys.DEAD) == 1


def test_delete_one_entry_of_each_set(manager: Client, r: Any, wurk: Wurk) -> None:
    for kind, key in (("scheduled", keys.SCHEDULE), ("retries", keys.RETRY), ("dead", keys.DEAD)):
        keep = zadd(r, key, failed(), 1000.0)
        entry = zadd(r, key, failed(), 2000.0)
        response = manager.post(url("bulk", kind=kind), {"action": "delete", "key": [entry]})
        assert said(response) == ["1 job deleted."]
        assert [m["jid"] for m in members(r, key)] == [keep.split("-", 1)[1]]


def test_an_action_on_an_entry_that_has_gone_says_so(manager: Client, r: Any, wurk: Wurk) -> None:
    key = zadd(r, keys.RETRY, failed())
    r.delete(keys.RETRY)  # retried by a worker, deleted by a colleague...
    for action in ("retry", "kill", "delete"):
        response = manager.post(url("bulk", kind="retries"), {"action": action, "key": [key]})
        assert response.status_code == 302
        assert said(response) == [
            "1 job was no longer in the retry set (run, retried or deleted in the meantime)."
        ]
    assert r.llen("queue:default") == 0 and r.zcard(keys.DEAD) == 0


def test_a_malformed_key_is_treated_as_gone(manager: Client, r: Any, wurk: Wurk) -> None:
    for key in ("nonsense", "abc-def", "1.5-"):
        response = manager.post(url("bulk", kind="dead"), {"action": "delete", "key": [key]})
        assert response.status_code == 302 and "no longer in the dead set" in said(response)[0]
        detail = manager.get(url("entry", kind="dead", key=key))
        assert detail.status_code == 302 and said(detail) == ["That job is no longer in the dead set."]


def test_an_action_a_set_does_not_offer_is_refused(manager: Client, r: Any, wurk: Wurk) -> None:
    key = zadd(r, keys.DEAD, failed(), 10.0)
    response = manager.post(url("bulk", kind="dead"), {"action": "kill", "key": [key]})
    assert "Unknown action 'kill'" in said(response)[0] and r.zcard(keys.DEAD) == 1
    response = manager.post(url("bulk", kind="scheduled"), {"action": "retry", "key": [key]})
    assert "Unknown action" in said(response)[0]


def test_entries_sharing_a_score_are_told_apart_by_jid(manager: Client, r: Any, wurk: Wurk) -> None:
    a, b = failed(), failed()
    key_a = zadd(r, keys.RETRY, a, 1234.5)
    zadd(r, keys.RETRY, b, 1234.5)
    manager.post(url("bulk", kind="retries"), {"action": "retry", "key": [key_a]})
    assert [m["jid"] for m in members(r, keys.RETRY)] == [b["jid"]]
    assert wire.loads(r.lindex("queue:default", 0))["jid"] == a["jid"]


def test_an_unreadable_entry_is_listed_shown_and_deletable(manager: Client, r: Any, wurk: Wurk) -> None:
    r.zadd(keys.DEAD, {b"\xff not json": 1700000000.25})
    listing = manager.get(url("dead")).content.decode()
    [entry] = DeadSet(wurk).fetch(1700000000.25)
    key = entry.key  # no jid: "<score>-raw:<digest of its bytes>"
    assert key.startswith("1700000000.25-raw:")
    assert url("entry", kind="dead", key=key) in listing and "not valid UTF-8" in listing
    detail = manager.get(url("entry", kind="dead", key=key))
    assert detail.status_code == 200 and "Unreadable payload" in detail.content.decode()
    retry = manager.post(url("bulk", kind="dead"), {"action": "retry", "key": [key]})
    assert "could not be retried: the payload cannot be read" in said(retry)[0] and r.zcard(keys.DEAD) == 1
    manager.post(url("bulk", kind="dead"), {"action": "delete", "key": [key]})
    assert r.zcard(keys.DEAD) == 0


# Sorted sets: selected entries --------------------------------------------------------


def test_bulk_actions_report_done_and_gone(manager: Client, r: Any, wurk: Wurk) -> None:
    entry_keys = [zadd(r, keys.RETRY, failed(), 100.0 + i) for i in range(4)]
    gone = entry_keys.pop()
    r.zremrangebyscore(keys.RETRY, 103, 103)
    response = manager.post(
        url("bulk", kind="retries"),
        {"action": "kill", "key": [*entry_keys, gone], "next": "?page=1&order=newest"},
    )
    assert response["Location"] == url("retries") + "?page=1&order=newest"
    assert said(response) == [
        "3 jobs killed (moved to the dead set).",
        "1 job was no longer in the retry set (run, retried or deleted in the meantime).",
    ]
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 3


def test_bulk_retry_add_and_delete(manager: Client, r: Any, wurk: Wurk) -> None:
    dead = [zadd(r, keys.DEAD, failed(), 10.0 + i) for i in range(3)]
    assert said(manager.post(url("bulk", kind="dead"), {"action": "retry", "key": dead[:2]})) == [
        "2 jobs retried."
    ]
    assert r.llen("queue:default") == 2 and r.zcard(keys.DEAD) == 1
    scheduled = [zadd(r, keys.SCHEDULE, payload(queue="later")) for _ in range(2)]
    manager.post(url("bulk", kind="scheduled"), {"action": "add_to_queue", "key": scheduled})
    assert r.llen("queue:later") == 2 and r.zcard(keys.SCHEDULE) == 0
    manager.post(url("bulk", kind="dead"), {"action": "delete", "key": dead[2:]})
    assert r.zcard(keys.DEAD) == 0


def test_bulk_without_a_selection_or_with_a_foreign_next_url(manager: Client, r: Any, wurk: Wurk) -> None:
    response = manager.post(url("bulk", kind="dead"), {"action": "delete", "next": "https://evil.example/"})
    assert said(response) == ["Select one or more jobs first."]
    assert response["Location"] == url("dead")  # only a query string is kept, never another URL


# Sorted sets: everything --------------------------------------------------------------


def test_all_actions_ask_first(manager: Client, r: Any, wurk: Wurk) -> None:
    for i in range(3):
        zadd(r, keys.RETRY, failed(), 100.0 + i)
    confirm = manager.post(url("all", kind="retries"), {"action": "kill_all"})
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "Kill all 3 jobs in the retry set (move them to the dead set)?" in text
    assert 'name="action" value="kill_all"' in text and 'name="confirm" value="yes"' in text
    assert r.zcard(keys.RETRY) == 3


def test_retry_kill_add_and_delete_all(manager: Client, r: Any, wurk: Wurk) -> None:
    for i in range(3):
        zadd(r, keys.RETRY, failed(), 100.0 + i)
    response = manager.post(url("all", kind="retries"), {"action": "retry_all", "confirm": "yes"})
    assert said(response) == ["3 jobs retried."] and r.llen("queue:default") == 3 and r.zcard(keys.RETRY) == 0

    for i in range(2):
        zadd(r, keys.RETRY, failed(), 100.0 + i)
    manager.post(url("all", kind="retries"), {"action": "kill_all", "confirm": "yes"})
    assert r.zcard(keys.RETRY) == 0 and r.zcard(keys.DEAD) == 2

    r.zadd(keys.DEAD, {b"\xff unreadable": 5.0})
    response = manager.post(url("all", kind="dead"), {"action": "retry_all", "confirm": "yes"})
    assert said(response) == [
        "2 jobs retried.",
        "1 left in the dead set (unreadable payloads, or added meanwhile).",
    ]
    response = manager.post(url("all", kind="dead"), {"action": "delete_all", "confirm": "yes"})
    assert said(response) == ["1 job deleted."] and r.zcard(keys.DEAD) == 0

    for i in range(4):
        zadd(r, keys.SCHEDULE, payload(queue="later"), time.time() + 100 + i)
    manager.post(url("all", kind="scheduled"), {"action": "add_all", "confirm": "yes"})
    assert r.llen("queue:later") == 4 and r.zcard(keys.SCHEDULE) == 0


def test_all_actions_a_set_does_not_offer_are_refused(manager: Client, r: Any, wurk: Wurk) -> None:
    zadd(r, keys.DEAD, failed(), 5.0)
    response = manager.post(url("all", kind="dead"), {"action": "kill_all", "confirm": "yes"})
    assert "Unknown action 'kill_all'" in said(response)[0] and r.zcard(keys.DEAD) == 1


def test_actions_are_recorded_in_the_admin_history(manager: Client, r: Any, wurk: Wurk) -> None:
    """Dashboard actions sit in the admin's "Recent actions" beside every other admin change."""
    from django.contrib.admin.models import CHANGE, LogEntry

    from django_wurk.models import Dashboard

    for i in range(2):
        push(r, payload(args=[i]), queue="mail")
    manager.post(url("queue_pause"), {"name": "mail"})
    manager.post(url("queue_clear"), {"name": "mail", "confirm": "yes"})
    manager.post(url("queue_pause"), {"name": "mail"})  # already paused: nothing changed
    entries = list(LogEntry.objects.order_by("id"))
    assert [e.change_message for e in entries] == ["paused queue mail", "cleared queue mail (2 jobs)"]
    user_id = int(manager.session["_auth_user_id"])
    assert {(e.user_id, e.action_flag, e.content_type.model_class()) for e in entries} == {
        (user_id, CHANGE, Dashboard)
    }
    index = manager.get("/admin/").content.decode()
    assert "cleared queue mail (2 jobs)" in index and "paused queue mail" in index


def test_delete_and_clear_reach_a_queues_priority_lists(manager: Client, r: Any, wurk: Wurk) -> None:
    push(r, payload(args=[0]))
    high = push(r, payload(args=[5], priority=5), queue="default@5")
    response = manager.post(url("queue_delete"), {"name": "default", "digest": digest(high), "position": "1"})
    assert "Deleted app.jobs.Hello job" in said(response)[0] and r.llen("queue:default@5") == 0
    push(r, payload(args=[6], priority=-6), queue="default@-6")
    manager.post(url("queue_clear"), {"name": "default", "confirm": "yes"})
    assert not r.exists("queue:default", "queue:default@-6") and r.smembers(keys.QUEUES) == set()
