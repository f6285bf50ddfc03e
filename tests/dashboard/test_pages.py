"""What each page shows: counters, processes, queues, the sets with paging/order/search, details, metrics."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from django.test import Client

from django_wurk import Wurk
from django_wurk.core import keys, wire
from tests.dashboard.conftest import add_process, failed, payload, push, url, write_metrics, zadd

NDASH = "\N{EN DASH}"


def text(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def stat_value(page: str, name: str) -> str:
    match = re.search(rf'<span class="wurk-card-value" data-stat="{name}">([^<]*)<', page)
    assert match, name
    return match.group(1)


def test_dashboard_counters_history_and_redis(viewer: Client, r: Any) -> None:
    for i in range(3):
        push(r, payload(args=[i]))
    zadd(r, keys.SCHEDULE, payload())
    zadd(r, keys.RETRY, failed())
    zadd(r, keys.RETRY, failed())
    zadd(r, keys.DEAD, failed(), 5.0)
    add_process(r, busy_jobs=2)
    r.set(keys.STAT_PROCESSED, 12345)
    r.set(keys.STAT_FAILED, 67)
    r.set(keys.STAT_EXPIRED, 8)
    today = datetime.now(UTC).date().isoformat()
    r.set(keys.daily_stat("processed", today), 4321)
    page = text(viewer, url("changelist"))
    expected = {"processed": "12,345", "failed": "67", "busy": "2", "enqueued": "3", "scheduled": "1",
                "retries": "2", "dead": "1", "processes": "1", "expired": "8"}  # fmt: skip
    assert {name: stat_value(page, name) for name in expected} == expected
    assert '<svg class="wurk-chart"' in page and "Processed: 4321" in page  # the history chart's tooltip
    assert "last 30 days" in page and ("Valkey" in page or "Redis" in page)
    config = json.loads(
        re.search(r'id="wurk-live-config" type="application/json">(.*?)</script>', page).group(1)
    )  # type: ignore[union-attr]
    assert (
        config["statsUrl"] == url("stats")
        and config["interval"] == 5
        and config["initial"]["processed"] == 12345
    )
    seven = text(viewer, url("changelist") + "?days=7&interval=1")
    assert "last 7 days" in seven and '"interval": 1' in seven
    assert "last 30 days" in text(viewer, url("changelist") + "?days=9999&interval=x")


def test_stats_json_is_shaped_like_sidekiq_webs(viewer: Client, r: Any) -> None:
    push(r, payload())
    zadd(r, keys.DEAD, failed(), 5.0)
    r.set(keys.STAT_PROCESSED, 10)
    data = viewer.get(url("stats")).json()
    assert set(data) == {"sidekiq", "redis", "server_utc_time"}
    assert set(data["sidekiq"]) == {"processed", "failed", "busy", "processes", "enqueued", "scheduled",
                                    "retries", "dead", "default_latency", "expired"}  # fmt: skip
    assert (
        data["sidekiq"]["processed"] == 10
        and data["sidekiq"]["enqueued"] == 1
        and data["sidekiq"]["dead"] == 1
    )
    assert data["sidekiq"]["default_latency"] >= 90  # the job was enqueued 90 s "ago"
    assert {"redis_version", "uptime_in_days", "connected_clients", "used_memory_human",
            "used_memory_peak_human", "store_name", "store_version"} <= set(data["redis"])  # fmt: skip
    assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", data["server_utc_time"])


def test_busy_lists_processes_and_running_jobs(viewer: Client, r: Any) -> None:
    leader = add_process(r, "web-1:4242:0123456789ab", busy_jobs=2)
    add_process(r, "worker-2:77:ba9876543210", busy_jobs=0, tag="")
    r.hset("worker-2:77:ba9876543210", "quiet", "true")
    r.set(keys.LEADER, leader)
    page = text(viewer, url("busy"))
    assert "web-1:4242" in page and "worker-2:77" in page
    assert "2 / 5" in page and "0 / 5" in page and "53.0\xa0MB" in page  # rss is in KB
    assert "shop" in page and "canary" in page and "leader" in page
    assert "data-quiet>quiet<" in page
    assert page.count("app.jobs.Running") == 2 and "tid0" in page and "tid1" in page
    assert "1 hour ago" in page  # started


def test_busy_page_with_nothing_running(viewer: Client, wurk: Wurk) -> None:
    page = text(viewer, url("busy"))
    assert "No worker processes are running." in page and "Nothing is running right now." in page


def test_queues_page_shows_size_latency_and_paused(viewer: Client, r: Any) -> None:
    push(r, payload(), queue="default")
    push(r, payload(), queue="default")
    push(r, payload(), queue="reports")
    r.sadd(keys.PAUSED, "reports")
    page = text(viewer, url("queues"))
    assert 'data-queue="default"' in page and 'data-queue="reports"' in page
    row = page[page.index('data-queue="reports"') :]
    assert "paused" in row[: row.index("</tr>")]
    assert "3 jobs waiting" in page
    assert "1 min 30 s" in page  # the oldest job was enqueued 90 s ago


def test_a_queue_page_pages_through_jobs_in_both_orders(viewer: Client, r: Any) -> None:
    for i in range(60):
        push(r, payload(args=[f"job-{i:02d}"]))
    first = text(viewer, url("queue", name="default"))
    assert "job-59" in first and "job-35" in first and "job-34" not in first  # newest first, 25 a page
    assert f"1{NDASH}25 of 60" in first
    third = text(viewer, url("queue", name="default") + "?page=3")
    assert "job-09" in third and "job-00" in third and "job-10" not in third and f"51{NDASH}60 of 60" in third
    oldest = text(viewer, url("queue", name="default") + "?order=oldest")
    assert oldest.index("job-00") < oldest.index("job-01") and "job-25" not in oldest
    big = text(viewer, url("queue", name="default") + "?count=100")
    assert f"1{NDASH}60 of 60" in big
    assert f"1{NDASH}25 of 60" in text(viewer, url("queue", name="default") + "?count=7&page=x")


def test_an_empty_or_unknown_queue(viewer: Client, wurk: Wurk) -> None:
    unknown = viewer.get(url("queue", name="nothing-here"))
    assert unknown.status_code == 404 and "No queue named “nothing-here”." in unknown.content.decode()
    assert "No queues yet" in text(viewer, url("queues"))
    wurk.redis.sadd(keys.QUEUES, "nothing-here")
    assert "This queue is empty." in text(viewer, url("queue", name="nothing-here"))


def test_set_pages_order_and_page_in_redis(viewer: Client, r: Any) -> None:
    now = time.time()
    for i in range(30):
        zadd(r, keys.DEAD, failed(args=[f"dead-{i:02d}"]), now - 1000 + i)
    page = text(viewer, url("dead"))
    assert page.index("dead-29") < page.index("dead-28") and "dead-04" not in page  # newest first
    assert f"1{NDASH}25 of 30" in page
    oldest = text(viewer, url("dead") + "?order=oldest&page=2")
    assert "dead-25" in oldest and "dead-29" in oldest and "dead-24" not in oldest
    for i in range(3):
        zadd(r, keys.SCHEDULE, payload(args=[f"later-{i}"]), now + 100 * (i + 1))
    scheduled = text(viewer, url("scheduled"))
    assert scheduled.index("later-0") < scheduled.index("later-2")  # what is due next first
    assert "in 1 minute" in scheduled


def test_set_search_matches_class_args_and_error_text(viewer: Client, r: Any) -> None:
    zadd(r, keys.RETRY, failed("app.jobs.Charge", args=["order-17"], error_message="card declined"), 1.0)
    zadd(r, keys.RETRY, failed("app.jobs.Mail", args=["hello"], error_message="smtp timeout"), 2.0)
    for query, expected in (("Charge", "order-17"), ("hello", "app.jobs.Mail"), ("smtp time", "hello")):
        page = text(viewer, url("retries") + f"?q={query}")
        assert expected in page and "1 match for" in page, query
    assert "Nothing matches." in text(viewer, url("retries") + "?q=no-such-thing")
    assert "2 matches" in text(viewer, url("retries") + "?q=app.jobs")
    # Glob characters are searched for literally.
    assert "Nothing matches." in text(viewer, url("retries") + "?q=*")


def test_entry_page_shows_every_field_error_and_decoded_backtrace(viewer: Client, r: Any) -> None:
    job = failed("app.jobs.Charge", args=[17, {"currency": "EUR"}], error_message="card declined", tags=["billing"],
                 bid="b-123", custom_option="yes")  # fmt: skip
    key = zadd(r, keys.RETRY, job)
    page = text(viewer, url("entry", kind="retries", key=key))
    assert "app.jobs.Charge" in page and job["jid"] in page
    assert "ValueError" in page and "card declined" in page
    assert "app/jobs.py:12:in `perform&#x27;" in page and "2 lines, innermost first" in page
    for field in ("custom_option", "bid", "tags", "retry_count", "failed_at", "created_at", "enqueued_at"):
        assert f'<th scope="row">{field}</th>' in page, field
    assert "&quot;currency&quot;: &quot;EUR&quot;" in page
    assert url("retries") in page  # breadcrumb and back link


def test_entry_page_for_activejob_and_encrypted_arguments(viewer: Client, r: Any) -> None:
    aj = failed(
        "Sidekiq::ActiveJob::Wrapper",
        args=[{"job_class": "WelcomeMailer", "job_id": "5f3c", "queue_name": "mailers",
               "arguments": [{"_aj_globalid": "gid://shop/User/7"}, {"greeting": "hi",
                             "_aj_ruby2_keywords": ["greeting"]}], "executions": 0}],
        wrapped="WelcomeMailer",
    )  # fmt: skip
    key = zadd(r, keys.DEAD, aj, 10.0)
    page = text(viewer, url("entry", kind="dead", key=key))
    assert "WelcomeMailer" in page and "run by <code>Sidekiq::ActiveJob::Wrapper</code>" in page
    assert "gid://shop/User/7" in page and "_aj_ruby2_keywords" not in page.split("ActiveJob</h2>")[0]
    assert "<h2>ActiveJob</h2>" in page and "5f3c" in page
    listing = text(viewer, url("dead"))
    assert "WelcomeMailer" in listing and "_aj_globalid" not in listing

    secret = failed("app.jobs.Secret", args=[7, "c2VjcmV0IGJsb2I="], encrypt=True)
    key = zadd(r, keys.DEAD, secret, 11.0)
    page = text(viewer, url("entry", kind="dead", key=key))
    assert "[encrypted data]" in page and "c2VjcmV0IGJsb2I=" not in page
    assert "c2VjcmV0IGJsb2I=" not in text(viewer, url("dead"))


def test_entry_page_for_an_entry_that_has_gone_redirects_with_a_message(viewer: Client, r: Any) -> None:
    key = zadd(r, keys.SCHEDULE, payload())
    r.delete(keys.SCHEDULE)
    response = viewer.get(url("entry", kind="scheduled", key=key), follow=True)
    assert response.redirect_chain == [(url("scheduled"), 302)]
    assert "That job is no longer in the scheduled set." in response.content.decode()


def test_metrics_pages(viewer: Client, r: Any) -> None:
    write_metrics(r, "app.jobs.Fast", runs=10, failures=2)
    write_metrics(r, "app.jobs.Slow", runs=3, failures=0)
    page = text(viewer, url("metrics"))
    assert page.index("app.jobs.Fast") < page.index("app.jobs.Slow")  # busiest first
    rows = re.findall(r"<tr>\s*<td><a href=\"[^\"]+\"><code>([^<]+)</code></a></td>\s*"
                      r"<td class=\"wurk-num\">(\d+)</td>\s*<td class=\"wurk-num\">(\d+)</td>", page)  # fmt: skip
    assert rows == [("app.jobs.Fast", "10", "2"), ("app.jobs.Slow", "3", "0")]
    assert "13 executions" in page and "2 failed" in page
    assert "app.jobs.Slow" not in text(viewer, url("metrics") + "?q=fast")
    for period in ("8h", "24h", "bogus"):
        assert "app.jobs.Fast" in text(viewer, url("metrics") + f"?period={period}")
    detail = text(viewer, url("metrics_class", name="app.jobs.Fast"))
    assert "8 successful executions" in detail  # the histogram counts successes only
    assert "Execution-time histogram" in detail and "&lt; 20 ms" in detail
    assert "8 successful executions, last 8 hours only" in text(
        viewer, url("metrics_class", name="app.jobs.Fast") + "?period=24h"
    )
    assert "No class matches “nothing”." in text(viewer, url("metrics") + "?q=nothing")


def test_every_tab_listed_is_a_page_that_exists(viewer: Client, wurk: Wurk) -> None:
    from django_wurk.dashboard import nav

    page = text(viewer, url("changelist"))
    shown = re.findall(r'data-tab="([a-z]+)"', page)
    assert shown == [
        "dashboard",
        "busy",
        "queues",
        "scheduled",
        "retries",
        "dead",
        "metrics",
        "batches",
        "limits",
        "periodic",
    ]
    assert [t.key for t in nav.TABS] == shown


def test_tabs_show_the_set_sizes(viewer: Client, r: Any) -> None:
    zadd(r, keys.DEAD, failed(), 1.0)
    page = text(viewer, url("busy"))
    dead_tab = page[page.index('data-tab="dead"') :]
    assert '<span class="wurk-count" data-stat="dead">1</span>' in dead_tab[: dead_tab.index("</a>")]


def test_unreadable_jobs_do_not_break_pages(viewer: Client, r: Any) -> None:
    r.zadd(keys.RETRY, {b'{"class": 1}': 5.0, b"[1,2]": 6.0})
    r.sadd(keys.PROCESSES, "odd:1:x")
    r.hset("odd:1:x", mapping={"info": "not json", "busy": "1", "beat": str(time.time())})
    r.hset("odd:1:x:work", "t1", "not json either")
    r.hset("odd:1:x:work", "t2", json.dumps({"queue": "", "payload": "{broken", "run_at": 0}))
    assert "payload has no &#x27;class&#x27; string" in text(viewer, url("retries"))
    assert "odd:1:x" in text(viewer, url("busy"))
    for path in (url("changelist"), url("stats"), url("queues"), url("dead"), url("scheduled")):
        assert viewer.get(path).status_code == 200
    assert wire.loads(b'{"class":"x","args":[]}')  # sanity: the decoder itself is fine


def test_keyword_arguments_show_as_name_value_in_lists_and_on_the_job_page(viewer: Client, r: Any) -> None:
    from tests.test_job_arguments import send_welcome

    now = send_welcome.set(on_commit=False)  # the test runs inside a transaction never committed
    now.perform_async(7, template="<b>promo</b>")
    now.perform_in(600, user_id=8, cc=["a@example.com"])
    queue_page = text(viewer, url("queue", name="default"))
    # Escaped like every argument: the template's markup is text.
    assert "7, template=&quot;&lt;b&gt;promo&lt;/b&gt;&quot;" in queue_page
    scheduled = text(viewer, url("scheduled"))
    assert "user_id=8, cc=[&quot;a@example.com&quot;]" in scheduled
    [(member, score)] = r.zrange(keys.SCHEDULE, 0, -1, withscores=True)
    jid = json.loads(member)["jid"]
    page = text(viewer, url("entry", kind="scheduled", key=f"{score!r}-{jid}"))
    assert '<th scope="row">Keyword arguments</th>' in page
    assert "&quot;user_id&quot;: 8" in page and '<th scope="row">kwargs</th>' not in page


def test_a_queue_with_priorities_is_one_row_and_one_page(viewer: Client, r: Any) -> None:
    """Issue 26: ``queue:default@5`` and ``queue:default@-5`` are the queue ``default``."""
    push(r, payload(args=["zero"]), queue="default")
    push(r, payload(args=["high"], priority=5), queue="default@5")
    push(r, payload(args=["low"], priority=-5), queue="default@-5")
    page = text(viewer, url("queues"))
    assert page.count('data-queue="default') == 1 and "3 jobs waiting" in page
    queue = text(viewer, url("queue", name="default"))
    assert queue.index("low") < queue.index("zero") < queue.index("high")  # the last to run first
    assert f"1{NDASH}3 of 3" in queue
