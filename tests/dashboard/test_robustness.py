"""Read-only mode, Redis down, hostile job data, a huge dead set, and the stats token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client, override_settings

from django_wurk import Config, ConfigError, Wurk
from django_wurk.conf import Settings
from django_wurk.core import keys, wire
from tests.dashboard.conftest import add_process, failed, payload, push, url, write_metrics, zadd
from tests.dashboard.test_permissions import actions, pages

NDASH = "\N{EN DASH}"
XSS = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=2">'


@pytest.fixture
def data(wurk: Wurk, r: Any) -> dict[str, str]:
    queued = payload()
    push(r, queued)
    add_process(r)
    write_metrics(r)
    return {
        "scheduled": zadd(r, keys.SCHEDULE, payload()),
        "retries": zadd(r, keys.RETRY, failed()),
        "dead": zadd(r, keys.DEAD, failed(), time.time() - 10),
        "queued_jid": queued["jid"],
    }


# Read-only ----------------------------------------------------------------------------


def test_read_only_hides_and_refuses_every_action(
    manager: Client, wurk: Wurk, r: Any, use_app_settings: Callable[..., Settings], data: dict[str, str]
) -> None:
    use_app_settings(dashboard_read_only=True)
    before = (r.llen("queue:default"), r.zcard(keys.SCHEDULE), r.zcard(keys.RETRY), r.zcard(keys.DEAD))
    for page in pages(data):
        response = manager.get(page)
        assert response.status_code == 200, page
        body = response.content.decode()
        if page != url("stats"):
            assert "Read-only mode" in body
            assert 'method="post"' not in body.replace('id="logout-form" method="post"', ""), page
    for action, form in actions(data):
        response = manager.post(action, form)
        assert response.status_code == 403, action
        assert "read-only" in response.content.decode()
    assert (
        r.llen("queue:default"),
        r.zcard(keys.SCHEDULE),
        r.zcard(keys.RETRY),
        r.zcard(keys.DEAD),
    ) == before
    assert r.llen(keys.signals("web1:123:abcdef012345")) == 0


def test_read_only_setting_is_read_from_settings_and_the_environment() -> None:
    assert Settings.from_mapping({"DASHBOARD_READ_ONLY": "true"}).dashboard_read_only is True
    assert Settings.from_mapping({"DASHBOARD_READ_ONLY": False}).dashboard_read_only is False
    with pytest.raises(ConfigError, match="DASHBOARD_READ_ONLY"):
        Settings.from_mapping({"DASHBOARD_READ_ONLY": "maybe"})


# Redis down ---------------------------------------------------------------------------


@pytest.fixture
def redis_down(wurk: Wurk, test_config: Config) -> None:
    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0", redis_socket_timeout=1.0))


def test_pages_show_a_503_banner_when_redis_is_down(
    manager: Client, data: dict[str, str], redis_down: None
) -> None:
    for page in pages(data):
        response = manager.get(page)
        assert response.status_code == 503, page
        if page == url("stats"):
            body = response.json()
            assert body["error"] == "redis_unavailable" and "127.0.0.1:1" in body["message"]
            continue
        text = response.content.decode()
        assert "Redis is unavailable." in text and "redis://127.0.0.1:1/0" in text, page
        assert "Traceback" not in text
    for action, form in actions(data):
        response = manager.post(action, form)
        assert response.status_code == 503, action
        assert "Redis is unavailable." in response.content.decode()


@pytest.mark.parametrize(
    ("environ", "settings_url", "credited"),
    [
        ({"WURK_REDIS_URL": "redis://127.0.0.1:1/0"}, True, "WURK_REDIS_URL in the environment"),
        ({"WURK_REDIS_URL_FILE": "/run/secrets/redis"}, False, "WURK_REDIS_URL_FILE in the environment"),
        ({}, True, 'WURK["REDIS_URL"] in the settings'),
        ({"REDIS_URL": "redis://127.0.0.1:1/0"}, False, "REDIS_URL in the environment"),
        ({}, False, "the default"),
    ],
)
def test_the_503_page_credits_where_the_redis_url_came_from(
    manager: Client, redis_down: None, settings: Any, monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str], settings_url: bool, credited: str,
) -> None:  # fmt: skip
    for name in ("WURK_REDIS_URL", "WURK_REDIS_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    wurk_settings = {k: v for k, v in settings.WURK.items() if k != "REDIS_URL"}
    settings.WURK = {**wurk_settings, "REDIS_URL": "redis://127.0.0.1:1/0"} if settings_url else wurk_settings
    text = manager.get(url("changelist")).content.decode()
    assert f"(from {credited})" in text.replace("&quot;", '"'), text[text.find("reads") - 100 :][:400]


def test_the_503_page_never_shows_the_redis_password(
    manager: Client, wurk: Wurk, test_config: Config
) -> None:
    wurk.configure(test_config.replace(redis_url="redis://user:s3cret-pw@127.0.0.1:1/0"))
    text = manager.get(url("changelist")).content.decode()
    assert "s3cret-pw" not in text and "redis://user:***@127.0.0.1:1/0" in text


def test_a_broken_setting_shows_a_503_banner_too(manager: Client, wurk: Wurk) -> None:
    def broken() -> Config:
        return Config.from_mapping({"CONCURRENCY": "lots"})

    wurk.set_config_loader(broken)
    response = manager.get(url("dead"))
    assert response.status_code == 503
    assert "The Wurk configuration is invalid." in response.content.decode()


def test_a_broken_setting_of_the_app_shows_a_503_banner_too(
    manager: Client, wurk: Wurk, use_app_settings: Callable[..., Settings], data: dict[str, str]
) -> None:
    """A bad DASHBOARD_READ_ONLY must not leave pages guessing whether actions are allowed."""
    with override_settings(WURK={"DASHBOARD_READ_ONLY": "maybe"}):
        page = manager.get(url("dead"))
        action = manager.post(url("bulk", kind="dead"), {"action": "delete", "key": [data["dead"]]})
    for response in (page, action):
        assert response.status_code == 503
        text = response.content.decode()
        assert "The Wurk configuration is invalid." in text and "DASHBOARD_READ_ONLY" in text
    assert wurk.redis.zcard(keys.DEAD) == 1  # the action did nothing


# Hostile job data ---------------------------------------------------------------------


def test_job_data_is_always_escaped(manager: Client, wurk: Wurk, r: Any) -> None:
    evil_class = f"Evil{XSS}"
    push(r, payload(evil_class, [XSS, {"k": XSS_IMG}], tags=[XSS]), queue="default")
    retry = zadd(r, keys.RETRY, failed(evil_class, args=[XSS], error_message=f"{XSS} {XSS_IMG}",
                                       error_class=XSS, **{XSS: XSS}))  # fmt: skip
    dead = zadd(r, keys.DEAD, failed(XSS, args=[XSS_IMG], error_message=XSS), time.time() - 5)
    zadd(r, keys.SCHEDULE, payload(evil_class, [XSS]))
    add_process(r, "evil:1:abcdefabcdef", tag=XSS, labels=[XSS_IMG], version=XSS)
    r.hset(
        "evil:1:abcdefabcdef:work",
        "t9",
        json.dumps({"queue": XSS, "payload": wire.dumps(payload(XSS)), "run_at": 1}),
    )
    r.sadd(keys.QUEUES, XSS)
    write_metrics(r, evil_class)
    paths = [
        url("changelist"),
        url("busy"),
        url("queues"),
        url("queue", name="default"),
        url("queue", name=XSS),
        url("scheduled"),
        url("retries"),
        url("retries") + "?q=" + XSS,
        url("entry", kind="retries", key=retry),
        url("dead"),
        url("entry", kind="dead", key=dead),
        url("metrics"),
        url("metrics") + "?q=" + XSS,
        url("metrics_class", name=evil_class),
    ]
    for path in paths:
        response = manager.get(path)
        assert response.status_code == 200, path
        body = response.content.decode()
        assert "<script>window" not in body, path
        assert "<img src=x" not in body, path
        if path != url("changelist"):  # the front page shows no job data
            assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body, path


def test_a_queue_full_of_hostile_json_keeps_the_live_config_inert(manager: Client, r: Any) -> None:
    r.set(keys.STAT_PROCESSED, 1)
    push(r, payload(XSS, ["</script><script>window.__xss=1</script>"]))
    body = manager.get(url("changelist")).content.decode()
    config = body[body.index('id="wurk-live-config"') :]
    assert "</script><script>" not in config[: config.index("</script>")]


# A big dead set -----------------------------------------------------------------------


@pytest.mark.slow
def test_pages_work_with_100000_dead_entries(manager: Client, wurk: Wurk, r: Any) -> None:
    base = failed("app.jobs.Bulk")
    pipe = r.pipeline(transaction=False)
    now = time.time()
    for i in range(100_000):
        pipe.zadd(keys.DEAD, {wire.dumps({**base, "jid": f"{i:024x}", "args": [i]}): now - i})
    pipe.execute()
    assert r.zcard(keys.DEAD) == 100_000
    first = manager.get(url("dead"))
    assert first.status_code == 200
    text = first.content.decode()
    assert f"1{NDASH}25 of 100,000" in text and "4000" in text  # the last page is linked
    assert f"{0:024x}" in text  # the newest entry
    last = manager.get(url("dead") + "?page=4000&count=25").content.decode()
    assert f"99,976{NDASH}100,000 of 100,000" in last and f"{99_999:024x}" in last
    assert manager.get(url("dead") + "?page=99999").status_code == 200  # past the end: empty, not an error
    search = manager.get(
        url("dead") + "?q=" + "000000000000000000001869"
    ).content.decode()  # jid of entry 6249
    assert "1 match for" in search
    capped = manager.get(url("dead") + "?q=app.jobs.Bulk").content.decode()
    assert "The first 1,000 matches" in capped
    assert (
        '<span class="wurk-count" data-stat="dead">100,000</span>'
        in manager.get(url("changelist")).content.decode()
    )
    stats = manager.get(url("stats")).json()
    assert stats["sidekiq"]["dead"] == 100_000
    detail_key = f"{now - 50_000!r}-{50_000:024x}"
    assert manager.get(url("entry", kind="dead", key=detail_key)).status_code == 200


# The stats endpoint for monitoring ----------------------------------------------------


TOKEN = "monitoring-token-0123456789"


def test_stats_with_a_bearer_token_needs_no_login(
    client: Client, wurk: Wurk, r: Any, use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(dashboard_stats_token=TOKEN)
    r.set(keys.STAT_PROCESSED, 7)
    ok = client.get(url("stats"), headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.json()["sidekiq"]["processed"] == 7
    assert "no-cache" in ok["Cache-Control"] or "max-age=0" in ok["Cache-Control"]
    wrong = client.get(url("stats"), headers={"Authorization": "Bearer nope-nope-nope-nope"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "unauthorized"}
    # Without the header it is an ordinary admin page: the login.
    assert client.get(url("stats")).status_code == 302
    # The token opens the stats only.
    assert client.get(url("dead"), headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 302


def test_stats_token_is_off_by_default(client: Client, wurk: Wurk) -> None:
    response = client.get(url("stats"), headers={"Authorization": "Bearer "})
    assert response.status_code == 401


def test_stats_token_when_redis_is_down(
    client: Client, wurk: Wurk, test_config: Config, use_app_settings: Callable[..., Settings]
) -> None:
    use_app_settings(dashboard_stats_token=TOKEN)
    wurk.configure(test_config.replace(redis_url="redis://127.0.0.1:1/0"))
    response = client.get(url("stats"), headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 503 and response.json()["error"] == "redis_unavailable"


def test_stats_token_must_be_long_enough() -> None:
    with pytest.raises(ConfigError, match=r"DASHBOARD_STATS_TOKEN.*at least 16"):
        Settings(dashboard_stats_token="short")
    assert "monitoring" not in repr(Settings(dashboard_stats_token=TOKEN))


def test_login_redirect_keeps_the_page(client: Client, db: None, login: Callable[..., Client]) -> None:
    response = client.get(url("retries") + "?page=2")
    assert response["Location"] == "/admin/login/?next=" + url("retries") + "%3Fpage%3D2"
