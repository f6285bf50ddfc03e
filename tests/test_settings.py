"""The Django app's own settings (``django_wurk.conf.Settings``): the ``WURK`` keys the engine
never reads (``ENQUEUE``, ``DATABASE``, ``OUTBOX_RELAY_INTERVAL``, ``PUSH_RETRIES``,
``DASHBOARD_READ_ONLY``, ``DASHBOARD_STATS_TOKEN``).

Users write them in the same ``WURK`` dict and ``WURK_<KEY>`` variables as the engine's
keys, so everything here holds exactly as it does for ``Config`` (tests/test_conf.py):
defaults, settings, environment, ``_FILE`` variants, errors that name the key, the check.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.test import override_settings

from django_wurk import Config, ConfigError, conf
from django_wurk.conf import (
    Settings,
    app_setting_names,
    app_settings,
    build_config,
    build_settings,
    environment_values,
    setting_names,
)
from django_wurk.core import config as engine_config
from django_wurk.core.features import SETTINGS as FEATURE_SETTINGS

MOVED = ["ENQUEUE", "DATABASE", "OUTBOX_RELAY_INTERVAL", "PUSH_RETRIES", "DASHBOARD_READ_ONLY",
         "DASHBOARD_STATS_TOKEN", "PERIODIC", "LEADER", "LEADER_TTL", "HISTORY_INTERVAL",
         "HISTORY_RETENTION", "HEALTH_PORT", "HEALTH_BIND", "READY_WINDOW", "STATSD_HOST", "STATSD_PORT",
         "STATSD_PREFIX", "TRACING"]  # fmt: skip
TOKEN = "monitoring-token-0123456789"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the shell exports, these tests see only the environment they set up."""
    for name in setting_names():
        monkeypatch.delenv(f"WURK_{name}", raising=False)
        monkeypatch.delenv(f"WURK_{name}_FILE", raising=False)


def wurk_settings(**values: Any) -> Any:
    return override_settings(WURK=values)


# Which layer owns which key -----------------------------------------------------------


def test_the_app_owns_exactly_the_django_only_keys() -> None:
    assert app_setting_names() == MOVED
    # The engine's keys, its features' (each feature's own settings class), then the app's.
    assert setting_names() == engine_config.setting_names(FEATURE_SETTINGS) + MOVED
    assert not set(MOVED) & set(engine_config.setting_names(FEATURE_SETTINGS))


def test_the_engine_config_no_longer_knows_them() -> None:
    for name in MOVED:
        assert not hasattr(Config(), name.lower())
        with pytest.raises(ConfigError, match="unknown setting"):
            Config.from_mapping({name: "x"})


def test_one_wurk_dict_feeds_both_objects() -> None:
    with wurk_settings(CONCURRENCY=7, ENQUEUE="outbox", DASHBOARD_READ_ONLY=True):
        config, settings = build_config(environ={}), build_settings(environ={})
    assert config.concurrency == 7 and settings.enqueue == "outbox" and settings.dashboard_read_only
    # Each layer is built from its own keys: a bad key of one does not stop the other.
    with wurk_settings(CONCURRENCY="lots", ENQUEUE="outbox"):
        assert build_settings(environ={}).enqueue == "outbox"
    with wurk_settings(CONCURRENCY=7, ENQUEUE="later"):
        assert build_config(environ={}).concurrency == 7


# Defaults, settings, environment ------------------------------------------------------


def test_defaults_apply_when_nothing_is_set() -> None:
    with wurk_settings():
        s = build_settings(environ={})
    assert s == Settings()
    assert (s.enqueue, s.database, s.outbox_relay_interval, s.push_retries) == (
        "on_commit",
        "default",
        5.0,
        8,
    )
    assert (s.dashboard_read_only, s.dashboard_stats_token) == (False, "")


# (key, a value in settings.WURK, a text in WURK_<KEY>, that text's value)
EACH = [
    ("ENQUEUE", "outbox", "immediate", "immediate"),
    ("DATABASE", "other", "replica", "replica"),
    ("OUTBOX_RELAY_INTERVAL", 0.5, "2.5", 2.5),
    ("PUSH_RETRIES", 0, "3", 3),
    ("DASHBOARD_READ_ONLY", True, "off", False),
    ("DASHBOARD_STATS_TOKEN", TOKEN, TOKEN + "-env", TOKEN + "-env"),
]


@pytest.mark.parametrize(("key", "value", "text", "from_text"), EACH)
def test_each_setting_is_read_from_settings(key: str, value: Any, text: str, from_text: Any) -> None:
    with wurk_settings(**{key: value}):
        assert getattr(build_settings(environ={}), key.lower()) == value


@pytest.mark.parametrize(("key", "value", "text", "from_text"), EACH)
def test_each_setting_is_read_from_the_environment_over_settings(
    key: str, value: Any, text: str, from_text: Any
) -> None:
    with wurk_settings(**{key: value}):
        built = build_settings(environ={f"WURK_{key}": text})
    assert getattr(built, key.lower()) == from_text


def test_env_values_are_coerced_to_the_fields_types() -> None:
    env = {
        "WURK_OUTBOX_RELAY_INTERVAL": " 0.25 ",
        "WURK_PUSH_RETRIES": "4",
        "WURK_DASHBOARD_READ_ONLY": "Yes",
    }
    s = build_settings(environ=env)
    assert s.outbox_relay_interval == 0.25 and isinstance(s.outbox_relay_interval, float)
    assert s.push_retries == 4 and isinstance(s.push_retries, int)
    assert s.dashboard_read_only is True


def test_build_settings_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WURK_ENQUEUE", "immediate")
    with wurk_settings(ENQUEUE="outbox"):
        assert build_settings().enqueue == "immediate"
        assert environment_values() == {"ENQUEUE": "immediate"}


def test_the_stats_token_is_read_from_a_secret_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    env = {"WURK_DASHBOARD_STATS_TOKEN_FILE": str(secret)}
    assert build_settings(environ=env).dashboard_stats_token == TOKEN  # the newline dropped
    with pytest.raises(ConfigError) as err:
        build_settings(environ={"WURK_DASHBOARD_STATS_TOKEN_FILE": str(tmp_path / "nope")})
    assert err.value.setting == "DASHBOARD_STATS_TOKEN"
    assert "cannot read WURK_DASHBOARD_STATS_TOKEN_FILE" in str(err.value)


def test_the_stats_token_stays_out_of_repr() -> None:
    assert TOKEN not in repr(Settings(dashboard_stats_token=TOKEN))
    assert "dashboard_stats_token" not in repr(Settings(dashboard_stats_token=TOKEN))


# Bad values name their setting --------------------------------------------------------

BAD_VALUES = [
    ("ENQUEUE", "later", "must be one of on_commit, immediate, outbox"),
    ("ENQUEUE", 1, "a string"),
    ("DATABASE", None, "a string"),
    ("OUTBOX_RELAY_INTERVAL", 0, "greater than 0"),
    ("OUTBOX_RELAY_INTERVAL", "nan", "greater than 0"),
    ("OUTBOX_RELAY_INTERVAL", "often", "a number"),
    ("PUSH_RETRIES", -1, "0 or more"),
    ("PUSH_RETRIES", 2.5, "an integer"),
    ("PUSH_RETRIES", True, "a number"),
    ("DASHBOARD_READ_ONLY", "maybe", "true or false"),
    ("DASHBOARD_READ_ONLY", 1, "true or false"),
    ("DASHBOARD_STATS_TOKEN", "short", "at least 16 characters"),
    ("DASHBOARD_STATS_TOKEN", 1234567890123456789, "a string"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD_VALUES)
def test_every_bad_value_names_its_setting(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Settings.from_mapping({key: value})
    assert err.value.setting == key
    assert str(err.value).startswith(f"WURK[{key!r}]: ") and message in str(err.value)
    with wurk_settings(**{key: value}), pytest.raises(ConfigError) as via_settings:
        build_settings(environ={})
    assert via_settings.value.setting == key


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("ENQUEUE", "outbx"),
        ("OUTBOX_RELAY_INTERVAL", "-1"),
        ("PUSH_RETRIES", "many"),
        ("DASHBOARD_READ_ONLY", "perhaps"),
        ("DASHBOARD_STATS_TOKEN", "tooshort"),
    ],
)
def test_bad_environment_values_name_the_setting(key: str, text: str) -> None:
    with wurk_settings(), pytest.raises(ConfigError) as err:
        build_settings(environ={f"WURK_{key}": text})
    assert err.value.setting == key and repr(key) in str(err.value)


def test_a_short_token_error_does_not_show_the_token() -> None:
    with pytest.raises(ConfigError) as err:
        Settings(dashboard_stats_token="s3cret-short")
    assert "s3cret" not in str(err.value) and "got 12 characters" in str(err.value)


def test_unknown_keys_get_a_suggestion_from_both_layers() -> None:
    # A misspelt key of the app's, and one of the engine's: both builders name the right key.
    for builder in (build_config, build_settings):
        with wurk_settings(ENQUEU="outbox"), pytest.raises(ConfigError, match="did you mean 'ENQUEUE'"):
            builder(environ={})
        with wurk_settings(CONCURENCY=3), pytest.raises(ConfigError, match="did you mean 'CONCURRENCY'"):
            builder(environ={})
    with pytest.raises(ConfigError, match="did you mean 'PUSH_RETRIES'"):
        Settings.from_mapping({"PUSH_RETRY": 3})


# The system check ---------------------------------------------------------------------


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("check", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.parametrize(
    ("values", "setting"),
    [
        ({"ENQUEUE": "later"}, "ENQUEUE"),
        ({"PUSH_RETRIES": -1}, "PUSH_RETRIES"),
        ({"DASHBOARD_STATS_TOKEN": "short"}, "DASHBOARD_STATS_TOKEN"),
        ({"DASHBOARD_READ_ONLY": "maybe"}, "DASHBOARD_READ_ONLY"),
        ({"HISTORY_INTERVAL": 0}, "HISTORY_INTERVAL"),
        ({"HISTORY_RETENTION": -1}, "HISTORY_RETENTION"),
    ],
)
def test_check_reports_a_bad_app_setting_by_name(values: dict[str, Any], setting: str) -> None:
    with override_settings(WURK=values), pytest.raises(SystemCheckError) as err:
        run()
    text = str(err.value)
    assert "django_wurk.E001" in text and f"WURK[{setting!r}]" in text and f"WURK_{setting}" in text


def test_check_reports_a_bad_app_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WURK_ENQUEUE", "later")
    with pytest.raises(SystemCheckError, match="ENQUEUE"):
        run()


def test_check_reports_each_problem_once() -> None:
    with override_settings(WURK={"ENQUEU": "outbox"}):
        [unknown] = [m for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E001"]
    assert "did you mean 'ENQUEUE'" in unknown.msg
    # One bad key in each layer: both are reported.
    with override_settings(WURK={"CONCURRENCY": "lots", "ENQUEUE": "later"}):
        messages = [m.msg for m in run_checks(tags=["wurk"]) if m.id == "django_wurk.E001"]
    assert len(messages) == 2
    assert "WURK['CONCURRENCY']" in messages[0] and "WURK['ENQUEUE']" in messages[1]


def test_runwurk_refuses_to_start_on_a_bad_app_setting(use_app_settings: Callable[..., Settings]) -> None:
    with (
        override_settings(WURK={"ENQUEUE": "later"}),
        pytest.raises(CommandError, match=r"WURK\['ENQUEUE'\]: must be one of"),
    ):
        call_command("runwurk", skip_checks=True)


# Reading them: app_settings() ---------------------------------------------------------


def test_app_settings_are_built_on_first_use_then_kept(use_app_settings: Callable[..., Settings]) -> None:
    with wurk_settings(ENQUEUE="immediate"):
        first = app_settings()
    assert first.enqueue == "immediate"
    with wurk_settings(ENQUEUE="outbox"):
        assert app_settings() is first  # built once, as the engine's Config is


def test_a_broken_setting_is_raised_at_each_read_until_fixed(
    use_app_settings: Callable[..., Settings],
) -> None:
    with wurk_settings(PUSH_RETRIES="many"):
        for _ in range(2):
            with pytest.raises(ConfigError, match="PUSH_RETRIES"):
                app_settings()
    with wurk_settings(PUSH_RETRIES=2):
        assert app_settings().push_retries == 2


def test_use_app_settings_replaces_them_and_returns_what_it_replaced(
    use_app_settings: Callable[..., Settings],
) -> None:
    chosen = use_app_settings(enqueue="outbox")
    assert app_settings() is chosen
    mine = Settings(push_retries=1)
    assert conf.use_app_settings(mine) is chosen
    assert app_settings() is mine
    assert conf.use_app_settings(None) is mine
    with wurk_settings(DATABASE="other"):
        assert app_settings().database == "other"  # built from WURK again


def test_settings_are_frozen_and_replace_validates() -> None:
    s = Settings()
    with pytest.raises(AttributeError):
        s.enqueue = "outbox"  # type: ignore[misc]
    assert s.replace(enqueue="outbox").enqueue == "outbox"
    with pytest.raises(ConfigError, match="ENQUEUE"):
        s.replace(enqueue="sometime")
