"""Read the ``WURK`` settings: the engine's ``Config`` and the Django app's own ``Settings``.

One dict configures both layers, so users never need to know where the line runs. The keys
the engine reads (Redis, workers, retries) build ``django_wurk.core.config.Config``, which
knows nothing of Django, and carries the settings of the engine's features (batches, job
status, encryption: each feature's own class, ``Feature.settings``); the keys only this app
reads (``ENQUEUE``, ``DATABASE``, the outbox relay, the retries of a push after its commit,
the dashboard) build ``Settings`` here, read through ``app_settings()``. Every key belongs
to exactly one of them; any other key is an error that suggests the closest known key.

Precedence, highest first: command-line flags, environment, ``settings.WURK``, defaults.
Every ``WURK`` key ``K`` is also read from ``WURK_K`` in the environment, through
django-environ's file-aware mapping, so ``WURK_K_FILE=/run/secrets/...`` reads the value
from a mounted file (a trailing newline is dropped). When neither ``WURK_REDIS_URL`` nor
``WURK["REDIS_URL"]`` says where Redis is, the conventional ``REDIS_URL`` (or
``REDIS_URL_FILE``) does: it is a fallback, not an override, because a platform often sets
``REDIS_URL`` for a cache that is not the job server.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from environ.fileaware_mapping import FileAwareMapping

from django_wurk.core import config as engine_config
from django_wurk.core.config import (
    Config,
    ConfigError,
    UnknownSetting,
    fields_from_mapping,
    parse_bool,
    parse_number,
    parse_text,
)
from django_wurk.core.features import SETTINGS as FEATURE_SETTINGS
from django_wurk.periodic import PeriodicEntry, parse_entries

ENV_PREFIX = "WURK_"
ENQUEUE_MODES = ("on_commit", "immediate", "outbox")
#: The shortest dashboard stats token accepted: long enough that guessing it is hopeless.
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class Settings:
    """The ``WURK`` settings only the Django app reads; each field is its key in lower case."""

    #: When a push made inside a database transaction reaches Redis: ``on_commit`` (after
    #: the commit, never on rollback), ``immediate``, or ``outbox`` (a row written in the
    #: transaction, relayed to Redis after commit, or later by a worker if that failed).
    enqueue: str = "on_commit"
    #: The database alias whose transactions enqueueing follows when several are open.
    database: str = "default"
    #: How often a worker's outbox relay looks for rows left behind (seconds).
    outbox_relay_interval: float = 5.0
    #: Attempts to push after a commit before giving up and sending ``push_failed``.
    push_retries: int = 8
    #: The admin dashboard shows everything but changes nothing: its actions are hidden and refused.
    dashboard_read_only: bool = False
    #: A bearer token that lets monitoring read the dashboard's JSON stats without a login ("" = off).
    dashboard_stats_token: str = field(default="", repr=False)
    #: Periodic jobs: a list of ``{"cron": ..., "job": ..., "args", "queue", "retry", "tz"}``
    #: (docs/periodic.md); in the environment, the same list as JSON.
    periodic: tuple[PeriodicEntry, ...] = ()
    #: Whether this process campaigns to be the leader that fires periodic jobs.
    leader: bool = True
    #: Seconds the leader's lock lives without renewal: a dead leader is replaced within it.
    leader_ttl: float = 30.0
    #: Seconds between the leader's historical-metrics snapshots (docs/metrics.md).
    history_interval: float = 30.0
    #: Days the historical-metrics snapshots are kept; 0 records none.
    history_retention: float = 7.0
    #: The port a worker serves ``/metrics``, ``/live`` and ``/ready`` on (0 = off; docs/observability.md).
    health_port: int = 0
    #: The address the health port listens on.
    health_bind: str = "0.0.0.0"
    #: ``/ready`` fails when a worker's last heartbeat is older than this many seconds.
    ready_window: float = 30.0
    #: Send job counts and timings to this StatsD (DogStatsD) agent's host ("" = off).
    statsd_host: str = ""
    #: The StatsD agent's UDP port.
    statsd_port: int = 8125
    #: The first part of every StatsD metric name (Sidekiq Pro's ``sidekiq``).
    statsd_prefix: str = "sidekiq"
    #: OpenTelemetry spans for each enqueue and execution, joined through the payload.
    tracing: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Settings:
        """Build from a ``WURK``-style mapping (upper-case keys), coercing strings from the environment."""
        return cls(**fields_from_mapping(cls, values, lambda key, f, raw: _PARSERS[str(f.type)](key, raw)))


#: How a value from settings or the environment becomes a field's type (its annotation).
_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "str": parse_text,
    "bool": parse_bool,
    "int": functools.partial(parse_number, kind=int),
    "float": functools.partial(parse_number, kind=float),
    "tuple[PeriodicEntry, ...]": parse_entries,
}


def _validate(s: Settings) -> None:
    if s.enqueue not in ENQUEUE_MODES:
        raise ConfigError("ENQUEUE", f"must be one of {', '.join(ENQUEUE_MODES)}, got {s.enqueue!r}")
    if not s.outbox_relay_interval > 0:  # written so that NaN fails too
        raise ConfigError("OUTBOX_RELAY_INTERVAL", f"must be greater than 0, got {s.outbox_relay_interval!r}")
    if not s.push_retries >= 0:
        raise ConfigError("PUSH_RETRIES", f"must be 0 or more, got {s.push_retries!r}")
    if not s.leader_ttl > 0:
        raise ConfigError("LEADER_TTL", f"must be greater than 0, got {s.leader_ttl!r}")
    if not 0 < s.history_interval <= 86_400:
        raise ConfigError(
            "HISTORY_INTERVAL",
            f"must be a number of seconds above 0, at most 86400, got {s.history_interval!r}",
        )
    if not (s.history_retention == 0 or s.history_interval <= s.history_retention * 86_400 <= 3650 * 86_400):
        raise ConfigError(
            "HISTORY_RETENTION",
            "must be a number of days (0 records no history), at least HISTORY_INTERVAL and at most "
            f"3650, got {s.history_retention!r}",
        )
    if not 0 <= s.health_port <= 65535:
        raise ConfigError("HEALTH_PORT", f"must be a TCP port (1-65535, or 0 for off), got {s.health_port!r}")
    if not _listenable(s.health_bind):
        raise ConfigError(
            "HEALTH_BIND",
            "must be an IP address to listen on (0.0.0.0, 127.0.0.1, ::) or a host name, "
            f"got {s.health_bind!r}",
        )
    if not s.ready_window > 0:
        raise ConfigError("READY_WINDOW", f"must be greater than 0, got {s.ready_window!r}")
    if not 0 < s.statsd_port <= 65535:
        raise ConfigError("STATSD_PORT", f"must be a UDP port (1-65535), got {s.statsd_port!r}")
    if not s.statsd_prefix or any(c in s.statsd_prefix for c in "|:#,@\n "):
        raise ConfigError(
            "STATSD_PREFIX", f"must be a metric name prefix like 'sidekiq', got {s.statsd_prefix!r}"
        )
    if s.dashboard_stats_token and len(s.dashboard_stats_token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            "DASHBOARD_STATS_TOKEN",
            f"must be empty (off) or at least {MIN_TOKEN_LENGTH} characters long, "
            f"got {len(s.dashboard_stats_token)} characters",
        )


#: A host name to listen on: its labels, dot-separated (an IP address is read by ``ipaddress``).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"\A(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\Z")


def _listenable(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        # "1.2.3.4.5" matches the labels, but a name's last label is never all digits.
        return bool(_HOST_NAME.match(address)) and not address.rpartition(".")[2].isdigit()
    return True


def app_setting_names() -> list[str]:
    """The ``WURK`` keys only the Django app reads, in declaration order."""
    return [f.name.upper() for f in dataclasses.fields(Settings)]


def setting_names() -> list[str]:
    """Every ``WURK`` key, the engine's then the app's (the docs are checked against this)."""
    return engine_config.setting_names(FEATURE_SETTINGS) + app_setting_names()


# Reading the sources --------------------------------------------------------------------


class UnreadableFile(ConfigError):
    """``variable`` (a ``*_FILE`` variable) names a file that cannot be read as text."""

    def __init__(self, setting: str, variable: str, exc: BaseException) -> None:
        super().__init__(setting, f"cannot read {variable}: {exc}")
        self.variable = variable


def settings_values() -> dict[str, Any]:
    values = getattr(django_settings, "WURK", {})
    if not isinstance(values, Mapping):
        raise ConfigError("WURK", f"settings.WURK must be a dict, got {type(values).__name__}")
    return dict(values)


def environment_values(
    environ: Mapping[str, str] | None = None, errors: list[ConfigError] | None = None
) -> dict[str, str]:
    """Every ``WURK_K`` (or ``WURK_K_FILE``) set; an unreadable file is raised, or with
    ``errors`` added to it and the variable skipped."""
    env = FileAwareMapping(env=dict(os.environ if environ is None else environ), cache=False)
    found: dict[str, str] = {}
    for name in setting_names():
        try:
            value = _read(env, ENV_PREFIX + name)
        except ConfigError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        if value is not None:
            found[name] = value
    return found


def fallback_redis_url(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = FileAwareMapping(env=dict(os.environ if environ is None else environ), cache=False)
    value = _read(env, "REDIS_URL")
    return {"REDIS_URL": value} if value is not None else {}


def redis_url_source(environ: Mapping[str, str] | None = None) -> str:
    """Where the Redis URL in use came from, in the words a person would look for it (the
    dashboard's outage page names it): the same precedence as ``merged_values``."""
    env = dict(os.environ if environ is None else environ)
    for name in (ENV_PREFIX + "REDIS_URL", ENV_PREFIX + "REDIS_URL_FILE"):
        if name in env:
            return f"{name} in the environment"
    try:
        if "REDIS_URL" in settings_values():
            return 'WURK["REDIS_URL"] in the settings'
    except ConfigError:
        pass
    for name in ("REDIS_URL", "REDIS_URL_FILE"):
        if name in env:
            return f"{name} in the environment"
    return "the default"


def _read(env: FileAwareMapping, key: str) -> str | None:
    try:
        value = env[key]
    except KeyError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFile(key.removeprefix(ENV_PREFIX), f"{key}_FILE", exc) from None
    text = str(value)
    # A secret file usually ends with a newline; that one is not part of the value.
    return text.removesuffix("\n").removesuffix("\r") if key + "_FILE" in env.env else text


def merged_values(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    errors: list[ConfigError] | None = None,
) -> dict[str, Any]:
    """Every key set anywhere, the highest source winning; a key of neither layer is an error.

    Errors are raised, the first one found; with ``errors``, each unreadable file and unknown
    key is added to it instead and left out (``settings.WURK`` that is not a dict is raised).
    """
    merged: dict[str, Any] = {}
    try:
        fallback = fallback_redis_url(environ)  # read first: an unreadable file is an error either way
    except ConfigError as exc:
        if errors is None:
            raise
        errors.append(exc)
        fallback = {}
    merged.update(settings_values())
    merged.update(environment_values(environ, errors))
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if "REDIS_URL" not in merged and not _shards_name_default(merged.get("SHARDS")):
        # A fallback, so it never conflicts with a SHARDS["default"] that was set explicitly.
        merged.update(fallback)
    names = setting_names()
    for key in list(merged):
        if key not in names:
            if errors is None:
                raise UnknownSetting(key, names)
            errors.append(UnknownSetting(key, names))
            del merged[key]
    return merged


def _shards_name_default(raw: Any) -> bool:
    """Whether a ``SHARDS`` value (a dict, or JSON from the environment) names ``"default"``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return False  # reported, by name, when the configuration is built
    return isinstance(raw, Mapping) and "default" in raw


# Building -------------------------------------------------------------------------------


def build_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """The engine's effective configuration; raises ``ConfigError`` naming the offending key."""
    app_keys = set(app_setting_names())
    merged = merged_values(overrides, environ)
    return Config.from_mapping({k: v for k, v in merged.items() if k not in app_keys}, FEATURE_SETTINGS)


def build_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The app's effective settings; raises ``ConfigError`` naming the offending key."""
    app_keys = set(app_setting_names())
    merged = merged_values(None, environ)
    return Settings.from_mapping({k: v for k, v in merged.items() if k in app_keys})


def problems(environ: Mapping[str, str] | None = None) -> list[ConfigError]:
    """Every problem of the settings, not only the first: what ``manage.py check`` reports.

    Building stops at the first bad key. Here each bad key is left out once it is found and
    the layer built again, until it builds; so a second typo is not hidden behind the first,
    and a key that is wrong only next to another (``CONCURRENCY`` with ``CAPSULES``) is
    reported once, by the name the error gives.
    """
    found: list[ConfigError] = []
    try:
        merged = merged_values(None, environ, found)
    except ConfigError as exc:  # settings.WURK is not a dict: nothing else can be read
        return [exc]
    app_keys = set(app_setting_names())
    layers: list[tuple[Callable[[dict[str, Any]], object], dict[str, Any]]] = [
        (
            lambda values: Config.from_mapping(values, FEATURE_SETTINGS),
            {k: v for k, v in merged.items() if k not in app_keys},
        ),
        (Settings.from_mapping, {k: v for k, v in merged.items() if k in app_keys}),
    ]
    for build, values in layers:
        while True:
            try:
                build(values)
                break
            except ConfigError as exc:
                found.append(exc)
                if exc.setting not in values:
                    break  # it names a key not set here: leaving nothing out can fix it
                del values[exc.setting]
    return found


_current: Settings | None = None
_lock = threading.Lock()


def app_settings() -> Settings:
    """The app's settings, built on first use (so a broken one is reported by ``check``, not
    at import), then kept: the one place the transaction, outbox and dashboard code read them."""
    global _current
    current = _current
    if current is None:
        with _lock:
            if _current is None:
                _current = build_settings()
            current = _current
    return current


def use_app_settings(value: Settings | None) -> Settings | None:
    """Use ``value`` from now on (``None``: build from ``WURK`` again on next use).

    Returns the one it replaces, for tests to put it back.
    """
    global _current
    with _lock:
        previous, _current = _current, value
    return previous
