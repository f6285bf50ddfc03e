"""The Periodic tab: the loops and the leader, a loop's page and history, pause, unpause and
enqueue now; and the leader badge on Busy.

Same rules as every dashboard page: permissions, POST + CSRF for the actions, read-only
mode, loop data escaped, a loop that has gone answered plainly.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from django_wurk import Config, Wurk
from django_wurk.api import LoopSet, ProcessSet
from django_wurk.core import keys as core_keys
from django_wurk.core import wire
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.loops import LoopSpec, record_fire, register
from tests.dashboard.conftest import add_process, url, zadd
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"


class EveryMinutes:
    """A stand-in schedule: every ``step`` minutes on the minute (UTC)."""

    def __init__(self, step: int = 5) -> None:
        self.step = step
        self.expression = f"*/{step} * * * *"

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        candidate = moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        while candidate.minute % self.step:
            candidate += timedelta(minutes=1)
        return candidate


@pytest.fixture(autouse=True)
def immediate(wurk: Wurk, use_app_settings: Any) -> None:
    """Each test runs inside a transaction that is never committed: enqueue now pushes at once."""
    use_app_settings(enqueue="immediate")


def make_loop(r: Any, step: int = 5, **kw: Any) -> LoopSpec:
    spec = LoopSpec(EveryMinutes(step), kw.pop("job_class", jobs.echo.job_class), **kw)
    register(r, spec, time.time())
    return spec


def queued(r: Any, queue: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{queue}", 0, -1)]


def test_the_tab_lists_loops_with_schedule_job_queue_zone_and_times(viewer: Client, r: Any) -> None:
    berlin = make_loop(r, 5, args=(30, "x"), queue="low", tz=ZoneInfo("Europe/Berlin"))
    daily = make_loop(r, 15)
    r.hset(keys.loop(daily.lid), "lf", time.time() - 120)
    r.hset(keys.loop(daily.lid), "paused", "1")
    page = viewer.get(url("periodic")).content.decode()
    assert 'data-tab="periodic"' in page and ">Periodic" in page and "2 · 1 paused" in page
    row = page[page.index(f'data-lid="{berlin.lid}"') :]
    row = row[: row.index("</tr>")]
    assert url("loop", lid=berlin.lid) in row
    assert "*/5 * * * *" in row and "tests.jobsapp.jobs.echo" in row and "30, &quot;x&quot;" in row
    assert url("queue", name="low") in row and "Europe/Berlin" in row
    assert "<td data-paused>no</td>" in row
    assert row.count("—") == 1 and "<time" in row and ">in " in row  # never fired; next fire ahead
    other = page[page.index(f'data-lid="{daily.lid}"') :]
    other = other[: other.index("</tr>")]
    assert ">paused<" in other and "2 minutes ago" in other and url("queue", name="default") in other


def test_empty_state_and_no_leader(viewer: Client, r: Any) -> None:
    page = viewer.get(url("periodic")).content.decode()
    assert "No periodic loops are registered." in page and 'id="wurk-loops"' not in page
    assert ">no leader<" in page and "No process leads, so no loop fires" in page


def test_the_leader_is_named_on_the_tab_and_badged_on_busy(viewer: Client, r: Any, wurk: Wurk) -> None:
    live = add_process(r, "web1:123:abcdef012345", busy_jobs=0)
    other = add_process(r, "web2:456:0123456789ab", busy_jobs=0)
    r.set(keys.LEADER, live, ex=30)
    page = viewer.get(url("periodic")).content.decode()
    assert f"<code data-leader>{live}</code>" in page and url("busy") in page
    assert "not among the running processes" not in page
    busy = viewer.get(url("busy")).content.decode()
    rows = {
        ident: busy[busy.index(f'data-identity="{ident}"') :].split("</tr>")[0] for ident in (live, other)
    }
    assert ">leader<" in rows[live] and ">leader<" not in rows[other]
    assert url("periodic") in rows[live]  # the badge leads to the loops it fires
    # A leader whose heartbeat is gone (killed -9, its lease not yet lapsed) is named, and said to be gone.
    r.set(keys.LEADER, "gone:1:ffffffffffff", ex=30)
    page = viewer.get(url("periodic")).content.decode()
    assert "gone:1:ffffffffffff" in page and "not among the running processes" in page
    assert ">leader<" not in viewer.get(url("busy")).content.decode()
    # No leader marks nobody, not even a process whose identity reads as "".
    r.delete(keys.LEADER)
    r.sadd(core_keys.PROCESSES, "")
    r.hset("", mapping={"info": json.dumps({"hostname": "blank", "pid": 1}), "beat": time.time()})
    busy = viewer.get(url("busy")).content.decode()
    assert "blank:1" in busy and ">leader<" not in busy
    [blank] = [p for p in ProcessSet(wurk) if p.identity == ""]
    assert blank.leader is False  # the data API agrees


def test_a_loops_page_shows_options_args_times_and_history(viewer: Client, r: Any, wurk: Wurk) -> None:
    spec = make_loop(r, 5, args=({"days": 30}, [1, 2]), queue="low", retry=3, tz=ZoneInfo("Europe/Berlin"))
    lf = datetime(2026, 1, 15, 8, 0, tzinfo=UTC).timestamp()
    r.hset(keys.loop(spec.lid), "lf", lf)
    for i in range(30):
        record_fire(r, spec.lid, lf - 300 * (30 - i), f"jid{i:02d}aaaaaaaaaaaaaaaaaa")
    page = viewer.get(url("loop", lid=spec.lid)).content.decode()
    assert f"Loop {spec.lid}" in page
    assert "&quot;days&quot;: 30" in page and "Europe/Berlin" in page
    assert "<code>3</code>" in page  # retry
    assert "2026-01-15 08:00:00 UTC · 2026-01-15 09:00:00 CET" in page  # UTC and the loop's own clock
    assert "25 fires, newest first" in page
    assert page.index("jid29") < page.index("jid28") and "jid04" not in page and "jid05" in page
    assert url("loop_job", lid=spec.lid, jid="jid29aaaaaaaaaaaaaaaaaa") in page
    assert url("periodic") in page  # the breadcrumb back
    fresh = make_loop(r, 10)
    assert "It has not fired yet." in viewer.get(url("loop", lid=fresh.lid)).content.decode()


def test_a_history_jid_links_to_where_its_job_is_now(viewer: Client, r: Any, wurk: Wurk) -> None:
    spec = make_loop(r, 5, queue="nobody-listens")
    loop = LoopSet(wurk).get(spec.lid)
    assert loop is not None
    waiting = loop.enqueue_now()
    assert waiting is not None
    response = viewer.get(url("loop_job", lid=spec.lid, jid=waiting), follow=True)
    assert response.redirect_chain[-1][0] == url("queue", name="nobody-listens")
    assert "is waiting in queue" in response.content.decode()
    dead = {"class": "x", "args": [], "jid": "deadjid0123456789abcdef", "queue": "default"}
    key = zadd(r, core_keys.DEAD, dead, 1234.5)
    response = viewer.get(url("loop_job", lid=spec.lid, jid=dead["jid"]))
    assert response.status_code == 302 and response["Location"] == url("entry", kind="dead", key=key)
    identity = add_process(r, "web9:9:abcdef012345", busy_jobs=1)
    [work] = r.hvals(f"{identity}:work")
    running = json.loads(json.loads(work)["payload"])["jid"]
    response = viewer.get(url("loop_job", lid=spec.lid, jid=running), follow=True)
    assert (
        response.redirect_chain[-1][0] == url("busy")
        and f"Job {running} is running now" in response.content.decode()
    )
    response = viewer.get(url("loop_job", lid=spec.lid, jid="ranalready0123456789ab"), follow=True)
    assert response.redirect_chain[-1][0] == url("loop", lid=spec.lid)
    assert "it has probably run" in response.content.decode()


def test_pause_and_unpause_are_audited_and_return_to_the_page(
    manager: Client, r: Any, wurk: Wurk, caplog: pytest.LogCaptureFixture
) -> None:
    spec = make_loop(r)
    page = manager.get(url("periodic")).content.decode()
    assert 'data-action="pause"' in page and 'data-action="enqueue"' in page
    with caplog.at_level(logging.INFO, logger="django_wurk.dashboard"):
        response = manager.post(
            url("loop_pause"), {"lid": spec.lid, "next": url("loop", lid=spec.lid)}, follow=True
        )
    assert response.redirect_chain[-1][0] == url("loop", lid=spec.lid)
    text = response.content.decode()
    assert "Paused loop" in text and 'data-action="unpause"' in text
    assert r.hget(keys.loop(spec.lid), "paused") == b"1"
    what = f"paused loop {spec.lid} (tests.jobsapp.jobs.echo)"
    assert (
        any(m.endswith(what) for m in caplog.messages) and LogEntry.objects.filter(object_repr=what).exists()
    )
    again = manager.post(url("loop_pause"), {"lid": spec.lid}, follow=True)
    assert "was already paused" in again.content.decode()
    assert LogEntry.objects.filter(object_repr=what).count() == 1  # nothing changed, nothing recorded
    response = manager.post(
        url("loop_unpause"), {"lid": spec.lid, "next": "https://evil.example/"}, follow=True
    )
    assert response.redirect_chain[-1][0] == url("periodic")  # only our own pages
    assert "Unpaused loop" in response.content.decode()
    assert r.hget(keys.loop(spec.lid), "paused") == b"0"
    assert LogEntry.objects.filter(object_repr=f"unpaused loop {spec.lid} (tests.jobsapp.jobs.echo)").exists()
    assert (
        "was already not paused"
        in manager.post(url("loop_unpause"), {"lid": spec.lid}, follow=True).content.decode()
    )


def test_enqueue_now_pushes_one_job_shows_its_jid_and_leaves_the_schedule(
    manager: Client, r: Any, wurk: Wurk
) -> None:
    spec = make_loop(r, args=("now",), queue="low")
    before = r.hmget(keys.loop(spec.lid), "nf", "lf")
    response = manager.post(url("loop_enqueue"), {"lid": spec.lid, "next": url("periodic")}, follow=True)
    assert response.redirect_chain[-1][0] == url("periodic")
    [job] = queued(r, "low")
    assert job["class"] == "tests.jobsapp.jobs.echo" and job["args"] == ["now"]
    text = response.content.decode()
    assert f"Enqueued loop {spec.lid} (tests.jobsapp.jobs.echo) now: job {job['jid']} is on queue" in text
    assert r.hmget(keys.loop(spec.lid), "nf", "lf") == before
    assert LogEntry.objects.filter(change_message__endswith=f"jid {job['jid']}").exists()
    page = manager.get(url("loop", lid=spec.lid)).content.decode()
    assert url("loop_job", lid=spec.lid, jid=job["jid"]) in page  # in the history


def test_enqueue_now_of_a_job_this_process_does_not_know_pushes_nothing(manager: Client, r: Any) -> None:
    spec = make_loop(r, queue="low")
    r.hset(keys.loop(spec.lid), "klass", "os.system")
    response = manager.post(url("loop_enqueue"), {"lid": spec.lid}, follow=True)
    assert "no job is registered as “os.system”" in response.content.decode()
    assert queued(r, "low") == [] and r.llen(keys.history(spec.lid)) == 0
    assert not LogEntry.objects.exists()


def test_a_loop_that_vanished_is_said_to_be_gone(manager: Client, r: Any) -> None:
    spec = make_loop(r)
    page = manager.get(url("periodic")).content.decode()
    assert spec.lid in page
    r.srem(keys.PERIODIC, spec.lid)
    r.delete(keys.loop(spec.lid))  # a new leader pruned it meanwhile
    for action in ("loop_pause", "loop_unpause", "loop_enqueue"):
        response = manager.post(
            url(action), {"lid": spec.lid, "next": url("loop", lid=spec.lid)}, follow=True
        )
        assert response.status_code == 200 and response.redirect_chain[-1][0] == url("periodic")
        assert f"Loop {spec.lid} is no longer registered" in response.content.decode()
    assert not r.exists(keys.loop(spec.lid)) and queued(r, "default") == []  # no stray hash, no push
    assert not LogEntry.objects.exists()
    response = manager.get(url("loop", lid=spec.lid))
    assert response.status_code == 404 and "No periodic loop" in response.content.decode()
    assert (
        "No loop named in the request." in manager.post(url("loop_pause"), {}, follow=True).content.decode()
    )


def test_loop_data_is_escaped(manager: Client, r: Any) -> None:
    spec = make_loop(r, args=(XSS,))
    r.hset(keys.loop(spec.lid), mapping={"klass": XSS, "schedule": XSS, "tz": XSS})
    r.lpush(keys.history(spec.lid), wire.dumps([time.time(), XSS]))
    r.set(keys.LEADER, XSS, ex=30)
    for page in (url("periodic"), url("loop", lid=spec.lid)):
        text = manager.get(page).content.decode()
        assert XSS not in text and "&lt;script&gt;" in text
    response = manager.post(url("loop_enqueue"), {"lid": spec.lid}, follow=True)
    text = response.content.decode()
    assert XSS not in text and "no job is registered as “&lt;script&gt;" in text


def test_permissions_csrf_and_read_only(
    login: Callable[..., Client], wurk: Wurk, r: Any, client: Client, use_app_settings: Any
) -> None:
    spec = make_loop(r)
    record_fire(r, spec.lid, time.time(), "somejid0123456789abcdef")
    pages = [url("periodic"), url("loop", lid=spec.lid)]
    for page in pages:
        assert client.get(page).status_code == 302  # anonymous: to the login
        assert login().get(page).status_code == 403  # staff without the view permission
    viewer = login("view")
    for page in pages:
        text = viewer.get(page).content.decode()
        assert "Enqueue now" not in text and 'data-action="pause"' not in text
    actions = ("loop_pause", "loop_unpause", "loop_enqueue")
    for action in actions:
        assert viewer.post(url(action), {"lid": spec.lid}).status_code == 403
    manager = login("view", "manage")
    for action in actions:
        assert manager.get(url(action)).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(User.objects.get(pk=manager.session["_auth_user_id"]))
    for action in actions:
        assert strict.post(url(action), {"lid": spec.lid}).status_code == 403
    use_app_settings(enqueue="immediate", dashboard_read_only=True)
    for page in pages:
        text = manager.get(page).content.decode()
        assert "Read-only mode" in text and "Enqueue now" not in text and 'data-action="pause"' not in text
    for action in actions:
        assert manager.post(url(action), {"lid": spec.lid}).status_code == 403
    # None of it happened.
    assert r.hget(keys.loop(spec.lid), "paused") == b"0"
    assert r.llen("queue:default") == 0 and r.llen(keys.history(spec.lid)) == 1
    assert not LogEntry.objects.exists()


def test_redis_down_gives_the_503_page_for_every_periodic_page_and_action(
    manager: Client, wurk: Wurk, r: Any, test_config: Config
) -> None:
    spec = make_loop(r)
    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0", redis_socket_timeout=1.0))
    for page in (url("periodic"), url("loop", lid=spec.lid), url("loop_job", lid=spec.lid, jid="j")):
        response = manager.get(page)
        assert response.status_code == 503 and "Redis is unavailable." in response.content.decode(), page
    for action in ("loop_pause", "loop_unpause", "loop_enqueue"):
        response = manager.post(url(action), {"lid": spec.lid})
        assert response.status_code == 503 and "Redis is unavailable." in response.content.decode(), action


def test_a_loop_pruned_between_reading_and_writing_is_said_to_be_gone(
    manager: Client, r: Any, wurk: Wurk, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_loop(r)
    stale = LoopSet(wurk).get(spec.lid)
    r.srem(keys.PERIODIC, spec.lid)
    r.delete(keys.loop(spec.lid))
    monkeypatch.setattr(LoopSet, "get", lambda self, lid: stale)  # read just before the prune
    response = manager.post(url("loop_pause"), {"lid": spec.lid}, follow=True)
    assert f"Loop {spec.lid} is no longer registered" in response.content.decode()
    assert not r.exists(keys.loop(spec.lid))  # the pause left no stray hash behind
    assert not LogEntry.objects.exists()


def test_a_loop_with_keyword_arguments_shows_them_and_enqueue_now_passes_them(
    manager: Client, r: Any
) -> None:
    spec = make_loop(r, job_class=jobs.tracked.job_class, args=(4,), kwargs={"seconds": 0.5}, queue="low")
    page = manager.get(url("periodic")).content.decode()
    row = page[page.index(f'data-lid="{spec.lid}"') :]
    assert "4, seconds=0.5" in row[: row.index("</tr>")]
    manager.post(url("loop_enqueue"), {"lid": spec.lid, "next": url("periodic")})
    [job] = queued(r, "low")
    assert (job["args"], job["kwargs"]) == ([4], {"seconds": 0.5})
