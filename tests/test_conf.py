"""Configuration: ``Config`` itself, the Django glue (``conf``) and the system checks."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_wurk import Config, ConfigError, QueueSpec, TimestampStyle
from django_wurk.conf import build_config, environment_values, setting_names, settings_values
from django_wurk.core.config import did_you_mean, parse_queue, redact_url

#: Whatever the shell exports, these tests see only the environment they set up.
pytestmark = pytest.mark.usefixtures("clean_environment")


def wurk_settings(**values: Any) -> Any:
    return override_settings(WURK=values)


# Precedence ----------------------------------------------------------------------------


def test_defaults_apply_when_nothing_is_set() -> None:
    with wurk_settings():
        c = build_config(environ={})
    default = Config()
    assert c == default
    assert c.redis_url == "redis://127.0.0.1:6379/0"
    assert (c.concurrency, c.timeout, c.max_retries) == (5, 25.0, 25)
    assert c.queues == (QueueSpec("default", 0),)
    assert c.timestamps is TimestampStyle.FLOAT_SECONDS
    assert (c.dead_max_jobs, c.dead_timeout) == (10_000, 180 * 24 * 3600)
    assert c.pool_size == 10 and c.strict_order and c.strict_args and not c.legacy_workers_key


def test_settings_override_defaults() -> None:
    with wurk_settings(CONCURRENCY=7, QUEUES=["a", ("b", 2)], TIMEOUT=8, TAG="web", LABELS=["x"]):
        c = build_config(environ={})
    assert (c.concurrency, c.timeout, c.tag, c.labels) == (7, 8.0, "web", ("x",))
    assert c.queues == (QueueSpec("a", 0), QueueSpec("b", 2))
    assert c.pool_size == 12


def test_environment_overrides_settings_and_cli_overrides_both() -> None:
    env = {"WURK_CONCURRENCY": "9", "WURK_TIMEOUT": "3.5", "UNRELATED": "x"}
    with wurk_settings(CONCURRENCY=7, TIMEOUT=8, TAG="from-settings"):
        c = build_config(environ=env)
        assert (c.concurrency, c.timeout, c.tag) == (9, 3.5, "from-settings")
        c = build_config({"CONCURRENCY": 11, "TIMEOUT": None}, environ=env)
        assert (c.concurrency, c.timeout) == (11, 3.5)  # a None flag was not given
        assert build_config({"TAG": "cli"}, environ=env).tag == "cli"


def test_build_config_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WURK_CONCURRENCY", "13")
    with wurk_settings(CONCURRENCY=7):
        assert build_config().concurrency == 13
        assert environment_values() == {"CONCURRENCY": "13"}


def test_every_setting_is_read_from_its_environment_variable() -> None:
    env = {f"WURK_{name}": f"value-of-{name}" for name in setting_names()}
    assert environment_values(env) == {name: f"value-of-{name}" for name in setting_names()}
    assert "REDIS_URL" in setting_names() and "CONCURRENCY" in setting_names()
    assert all(name == name.upper() for name in setting_names())


def test_redis_url_falls_back_to_the_conventional_variable() -> None:
    plain = {"REDIS_URL": "redis://plain:6379/1"}
    with wurk_settings(REDIS_URL="redis://settings:6379/0"):
        assert build_config(environ={}).redis_url == "redis://settings:6379/0"
        # A plain REDIS_URL (often a cache's) never overrides an explicit setting...
        assert build_config(environ=plain).redis_url == "redis://settings:6379/0"
        both = {**plain, "WURK_REDIS_URL": "redis://wurk:6379/2"}
        assert build_config(environ=both).redis_url == "redis://wurk:6379/2"
    # ...but fills in when nothing else says where Redis is.
    with wurk_settings():
        assert build_config(environ=plain).redis_url == "redis://plain:6379/1"
    # Only REDIS_URL falls back: other keys need the prefix.
    assert environment_values({"CONCURRENCY": "3"}) == {}


def test_file_variants_are_read_with_the_newline_dropped(tmp_path: Path) -> None:
    url_file = tmp_path / "url"
    url_file.write_text("redis://:pw@filehost:6379/2\n", encoding="utf-8")
    conc_file = tmp_path / "concurrency"
    conc_file.write_text("12\n", encoding="utf-8")
    env = {"WURK_REDIS_URL_FILE": str(url_file), "WURK_CONCURRENCY_FILE": str(conc_file)}
    assert environment_values(env) == {"REDIS_URL": "redis://:pw@filehost:6379/2", "CONCURRENCY": "12"}
    c = build_config(environ=env)
    assert (c.redis_url, c.concurrency) == ("redis://:pw@filehost:6379/2", 12)
    # A _FILE beats the plain variable (django-environ's rule), and REDIS_URL_FILE is a fallback too.
    assert build_config(environ={**env, "WURK_CONCURRENCY": "1"}).concurrency == 12
    with wurk_settings():
        assert (
            build_config(environ={"REDIS_URL_FILE": str(url_file)}).redis_url == "redis://:pw@filehost:6379/2"
        )


def test_a_plain_value_keeps_its_whitespace_for_the_coercion() -> None:
    # Only file contents are stripped; numbers tolerate the spaces anyway.
    assert environment_values({"WURK_TAG": " spaced "}) == {"TAG": " spaced "}
    assert build_config(environ={"WURK_CONCURRENCY": " 4 "}).concurrency == 4


@pytest.mark.parametrize(
    ("variable", "setting"),
    [("WURK_REDIS_URL_FILE", "REDIS_URL"), ("REDIS_URL_FILE", "REDIS_URL"), ("WURK_TIMEOUT_FILE", "TIMEOUT")],
)
def test_a_missing_file_names_the_key(tmp_path: Path, variable: str, setting: str) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as err:
        build_config(environ={variable: str(missing)})
    assert err.value.setting == setting
    assert variable in str(err.value) and setting in str(err.value)


def test_settings_wurk_must_be_a_dict() -> None:
    with override_settings(WURK=["REDIS_URL"]), pytest.raises(ConfigError) as err:
        settings_values()
    assert err.value.setting == "WURK" and "list" in str(err.value)
    with override_settings():
        from django.conf import settings

        del settings.WURK
        assert settings_values() == {}


# Coercion and validation ---------------------------------------------------------------

BAD_VALUES = [
    ("CONCURRENCY", "abc", "an integer"),
    ("CONCURRENCY", 0, "greater than 0"),
    ("CONCURRENCY", True, "a number"),
    ("CONCURRENCY", 2.5, "an integer"),
    ("CONCURRENCY", None, "an integer"),
    ("TIMEOUT", -1, "0 or more"),
    ("TIMEOUT", "soon", "a number"),
    ("TIMEOUT", "nan", "TIMEOUT"),
    ("TIMESTAMPS", "bogus", "'float'"),
    ("QUEUES", ["a,x"], "not an integer"),
    ("QUEUES", [("a", "3")], "not an integer"),
    ("QUEUES", ["a,-1"], ">= 0"),
    ("QUEUES", ["bad name"], "must match"),
    ("QUEUES", [("a",)], "cannot read"),
    ("QUEUES", [], "at least one"),
    ("QUEUES", 5, "list of queues"),
    ("REDIS_URL", "http://u:secret@example.com/0", "redis://"),
    ("REDIS_URL", 6379, "a string"),
    ("LEGACY_WORKERS_KEY", "maybe", "true or false"),
    ("STRICT_ARGS", 1, "true or false"),
    ("DEAD_MAX_JOBS", -1, "0 or more"),
    ("DEAD_TIMEOUT", 0, "greater than 0"),
    ("MAX_RETRIES", "many", "an integer"),
    ("REDIS_POOL_SIZE", 0, "at least 1"),
    ("POLL_INTERVAL", 0, "greater than 0"),
    ("POLL_INTERVAL", "nan", "POLL_INTERVAL"),
    ("HEARTBEAT_INTERVAL", "0", "greater than 0"),
    ("FETCH_TIMEOUT", -0.5, "greater than 0"),
    ("BACKTRACE_LIMIT", 0, "greater than 0"),
    ("TAG", 5, "a string"),
    ("LABELS", 5, "LABELS"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD_VALUES)
def test_every_bad_value_names_its_setting(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Config.from_mapping({key: value})
    assert err.value.setting == key
    assert str(err.value).startswith(f"WURK[{key!r}]: ")
    assert message in str(err.value)
    with wurk_settings(**{key: value}), pytest.raises(ConfigError) as via_settings:
        build_config(environ={})
    assert via_settings.value.setting == key


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("CONCURRENCY", "abc"),
        ("CONCURRENCY", "2.5"),
        ("TIMEOUT", "-1"),
        ("TIMESTAMPS", "bogus"),
        ("QUEUES", "a,x"),
        ("QUEUES", "a;;b"),
        ("QUEUES", ""),
        ("STRICT_ARGS", "perhaps"),
        ("REDIS_URL", "localhost:6379"),
    ],
)
def test_bad_environment_values_name_the_setting(key: str, text: str) -> None:
    with wurk_settings(), pytest.raises(ConfigError) as err:
        build_config(environ={f"WURK_{key}": text})
    assert err.value.setting == key and repr(key) in str(err.value)


def test_unknown_keys_get_a_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        Config.from_mapping({"CONCURENCY": 3})
    assert err.value.setting == "CONCURENCY"
    assert "unknown setting" in str(err.value) and "did you mean 'CONCURRENCY'?" in str(err.value)
    with wurk_settings(REDIS_ULR="redis://x"), pytest.raises(ConfigError, match="did you mean 'REDIS_URL'"):
        build_config(environ={})
    with pytest.raises(ConfigError) as far:
        Config.from_mapping({"XYZZY": 1})
    assert "unknown setting" in str(far.value) and "did you mean" not in str(far.value)
    assert did_you_mean("timout", setting_names()) == "; did you mean 'TIMEOUT'?"


def test_bad_url_errors_hide_the_password() -> None:
    with pytest.raises(ConfigError) as err:
        Config(redis_url="http://user:hunter2@example.com:80/0")
    assert "hunter2" not in str(err.value) and "***" in str(err.value)


def test_string_values_are_coerced() -> None:
    c = Config.from_mapping(
        {
            "CONCURRENCY": "8",
            "TIMEOUT": "0",
            "MAX_RETRIES": "3",
            "HEARTBEAT_INTERVAL": "2.5",
            "TIMESTAMPS": "ms",
            "LEGACY_WORKERS_KEY": "Yes",
            "STRICT_ARGS": "off",
            "LABELS": "a, b,,c ",
            "POLL_INTERVAL": "",
            "REDIS_POOL_SIZE": "",
            "DEAD_TIMEOUT": "60",
        }
    )
    assert (c.concurrency, c.timeout, c.max_retries, c.heartbeat_interval) == (8, 0.0, 3, 2.5)
    assert c.timestamps is TimestampStyle.INT_MILLISECONDS
    assert c.legacy_workers_key is True and c.strict_args is False
    assert c.labels == ("a", "b", "c")
    assert c.poll_interval is None and c.redis_pool_size is None
    assert c.dead_timeout == 60 and isinstance(c.concurrency, int) and isinstance(c.timeout, float)


@pytest.mark.parametrize(
    ("text", "expected"), [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]
)
def test_boolean_words(text: str, expected: bool) -> None:
    assert Config.from_mapping({"STRICT_ARGS": text}).strict_args is expected


# Queues --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a", QueueSpec("a", 0)),
        ("a,3", QueueSpec("a", 3)),
        (" mail.out , 2 ", QueueSpec("mail.out", 2)),
        ("a,", QueueSpec("a", 0)),
        (("a", 3), QueueSpec("a", 3)),
        (["b:c-d_e", 0], QueueSpec("b:c-d_e", 0)),
        (QueueSpec("x", 4), QueueSpec("x", 4)),
    ],
)
def test_parse_queue_accepts_each_form(value: Any, expected: QueueSpec) -> None:
    assert parse_queue("QUEUES", value) == expected


@pytest.mark.parametrize(
    "value", [("a", True), ("a", 1.5), "a,b", "a,1,2", "", "a b", ("a", 1, 2), 7, QueueSpec("q", -1)]
)
def test_parse_queue_refuses_the_rest(value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        parse_queue("QUEUES", value)
    assert err.value.setting == "QUEUES"


def test_queues_from_the_environment_are_semicolon_separated() -> None:
    assert build_config(environ={"WURK_QUEUES": "a;b"}).queues == (QueueSpec("a"), QueueSpec("b"))
    c = build_config(environ={"WURK_QUEUES": "critical,3;default,1;low"})
    assert c.queues == (QueueSpec("critical", 3), QueueSpec("default", 1), QueueSpec("low", 0))
    assert not c.strict_order
    assert c.weighted_queues == (QueueSpec("critical", 3), QueueSpec("default", 1), QueueSpec("low", 1))


def test_queue_names_are_deduplicated_in_order() -> None:
    c = Config.from_mapping({"QUEUES": ["b", "a", "b,2"]})
    assert c.queue_names == ("b", "a")
    assert Config.from_mapping({"QUEUES": "x;y"}).strict_order


# redact_url ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://user:secret@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:secret@host/1", "redis://:***@host/1"),
        (
            "rediss://u:p%40ss@cache.example.com:6380/0?ssl_cert_reqs=none",
            "rediss://u:***@cache.example.com:6380/0?ssl_cert_reqs=none",
        ),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("redis://user@host:6379/0", "redis://user@host:6379/0"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
        ("redis://:secret@[::1]:6379/0", "redis://:***@[::1]:6379/0"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_url_of_garbage_never_raises() -> None:
    assert redact_url("redis://[::1") == "<unparseable redis url>"


# System checks -------------------------------------------------------------------------

#: For a test that runs the whole ``check`` (``run()`` without ``--tag``): from Django 6.1
#: the model checks ask every database whether it supports JSONField (the Schedule model
#: has two), so the check reaches the databases as it does in a project.
every_database = pytest.mark.django_db(databases="__all__")


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("check", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def wurk_checks(include_deployment_checks: bool = False) -> list[Any]:
    """What ``check --tag wurk`` shows: the suite silences W005 (its test modules define jobs)."""
    messages = run_checks(tags=["wurk"], include_deployment_checks=include_deployment_checks)
    return [m for m in messages if not m.is_silenced()]


@every_database
def test_check_passes_with_the_test_settings() -> None:
    out, _ = run()
    assert "no issues" in out


@every_database
@pytest.mark.parametrize(
    ("values", "setting"),
    [
        ({"CONCURRENCY": "abc"}, "CONCURRENCY"),
        ({"TIMEOUT": -1}, "TIMEOUT"),
        ({"TIMESTAMPS": "bogus"}, "TIMESTAMPS"),
        ({"QUEUES": ["a,x"]}, "QUEUES"),
    ],
)
def test_check_reports_a_bad_setting_by_name(values: dict[str, Any], setting: str) -> None:
    with override_settings(WURK=values), pytest.raises(SystemCheckError) as err:
        run()
    text = str(err.value)
    assert "django_wurk.E001" in text
    assert f"WURK[{setting!r}]" in text
    assert f"WURK_{setting}" in text  # the hint names the environment variable too


def test_check_hints_at_no_environment_variable_for_an_unknown_key() -> None:
    """WURK_CONCURENCY is never read: naming it sent a newcomer to set a variable for a typo."""
    with override_settings(WURK={"CONCURENCY": 3}):
        [error] = [m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E001"]
    assert error.msg == "WURK['CONCURENCY']: unknown setting; did you mean 'CONCURRENCY'?"
    assert error.hint is not None and "WURK_CONCURENCY" not in error.hint
    assert "Correct the key's name or remove it" in error.hint


def test_check_reports_every_bad_setting_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Not one per run: two typos, three bad values (one a CAPSULES clash, one from the
    environment, one in the app's layer) and an unreadable file, each by its name."""
    monkeypatch.setenv("WURK_TIMEOUT", "soon")
    monkeypatch.setenv("WURK_TAG_FILE", str(tmp_path / "missing"))
    values = {
        "CONCURENCY": 3,
        "QUEUS": ["a"],
        "CAPSULES": {"mail": {"queues": ["mail"], "concurrency": 2}},
        "CONCURRENCY": 9,
        "HEARTBEAT_INTERVAL": 0,
        "ENQUEUE": "later",
    }
    with override_settings(WURK=values):
        errors = [m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E001"]
    named = sorted(m.msg.split("]")[0] + "]" for m in errors)
    assert named == sorted(
        [
            "WURK['CONCURENCY']",
            "WURK['QUEUS']",
            "WURK['CONCURRENCY']",
            "WURK['HEARTBEAT_INTERVAL']",
            "WURK['TIMEOUT']",
            "WURK['TAG']",
            "WURK['ENQUEUE']",
        ]
    ), [m.msg for m in errors]


@pytest.mark.parametrize("variable", ["WURK_REDIS_URL_FILE", "REDIS_URL_FILE"])
def test_check_hints_at_the_file_variable_for_an_unreadable_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    monkeypatch.setenv(variable, str(tmp_path / "nope"))
    with override_settings(WURK={}):
        [error] = [m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E001"]
    assert f"cannot read {variable}" in error.msg
    assert error.hint == f"Make {variable} name a readable UTF-8 file, or unset it."


@every_database
def test_check_reports_a_bad_environment_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WURK_CONCURRENCY", "lots")
    with pytest.raises(SystemCheckError, match="CONCURRENCY"):
        run()


@every_database
def test_check_reports_settings_that_are_not_a_dict() -> None:
    with (
        override_settings(WURK="redis://x"),
        pytest.raises(SystemCheckError, match=r"settings\.WURK must be a dict"),
    ):
        run()


@every_database
def test_deploy_check_warns_when_redis_does_not_answer() -> None:
    with override_settings(WURK={"REDIS_URL": "redis://:sekrit@127.0.0.1:1/0"}):
        _, err = run("--deploy", "--tag", "wurk")
        assert "django_wurk.W001" in err
        assert "127.0.0.1:1" in err and "sekrit" not in err
        ids = [m.id for m in wurk_checks(include_deployment_checks=True)]
        assert ids == ["django_wurk.W001"]
        # A warning, not an error: a deploy can go on while Redis is down.
        run("--deploy")
        # It opens a connection, so a plain `check` (even one limited to the tag) skips it.
        assert [m.id for m in wurk_checks()] == []


def test_deploy_check_is_quiet_when_redis_answers(redis_url: str) -> None:
    with override_settings(WURK={"REDIS_URL": redis_url}):
        assert wurk_checks(include_deployment_checks=True) == []


def test_deploy_check_leaves_a_bad_config_to_the_settings_check() -> None:
    with override_settings(WURK={"CONCURRENCY": "abc"}):
        ids = [m.id for m in wurk_checks(include_deployment_checks=True)]
    assert ids == ["django_wurk.E001"]


def test_redaction_covers_query_string_passwords_and_repr() -> None:
    assert redact_url("redis://h:6379/0?password=hunter2&db=1") == "redis://h:6379/0?password=***&db=1"
    assert "hunter2" not in repr(Config(redis_url="redis://:hunter2@h:6379/0"))


def test_a_secret_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "url"
    bad.write_bytes(b"redis://\xff\xfe")
    with pytest.raises(ConfigError) as err:
        environment_values({"WURK_REDIS_URL_FILE": str(bad)})
    assert err.value.setting == "REDIS_URL" and "cannot read WURK_REDIS_URL_FILE" in str(err.value)


# Without the app ------------------------------------------------------------------------

APP_MISSING_SCRIPT = """
import sys
from django.conf import settings
{configure}
from django_wurk import job

@job
def hello() -> None:
    pass

from django.core.exceptions import ImproperlyConfigured
try:
    jid = hello.perform_async()
except ImproperlyConfigured as exc:
    print("refused:", exc)
else:
    print("pushed", jid)
"""

CONFIGURE_WITHOUT_THE_APP = """
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes"],
    DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}},
    WURK={{"REDIS_URL": {url!r}}},
)
import django
django.setup()
"""


@pytest.mark.parametrize(
    ("extra", "refusal"),
    [
        ("", 'refused: add "django_wurk" to INSTALLED_APPS: without its app nothing reads settings.WURK'),
        # Configured, but django.setup() not called yet (the app would be, but is not, loaded):
        ("!", "refused: django_wurk is used before Django has loaded its apps"),
        # No settings at all:
        ("?", "refused: django_wurk is used before Django's settings are configured"),
    ],
)
def test_a_push_without_the_app_fails_naming_the_fix(
    redis_url: str, r: Any, extra: str, refusal: str
) -> None:
    """Before: it went to redis://127.0.0.1:6379/0 with WURK, WURK_* and on-commit all unread."""
    import subprocess
    import sys

    configure = CONFIGURE_WITHOUT_THE_APP.format(url=redis_url)
    if extra == "!":
        configure = configure.replace("import django\ndjango.setup()", "")
    elif extra == "?":
        configure = ""
    proc = subprocess.run(
        [sys.executable, "-c", APP_MISSING_SCRIPT.format(configure=configure)],
        cwd=Path(__file__).resolve().parents[1],
        env={"PATH": "/usr/bin:/bin", "WURK_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(refusal), proc.stdout
    assert r.llen("queue:default") == 0
