"""Build the engine's ``Config`` from Django settings, the environment and CLI flags.

Precedence, highest first: command-line flags, environment, ``settings.WURK``, defaults.
Every ``WURK`` key ``K`` is also read from ``WURK_K`` in the environment, through
django-environ's file-aware mapping, so ``WURK_K_FILE=/run/secrets/...`` reads the value
from a mounted file (a trailing newline is dropped). When neither ``WURK_REDIS_URL`` nor
``WURK["REDIS_URL"]`` says where Redis is, the conventional ``REDIS_URL`` (or
``REDIS_URL_FILE``) does: it is a fallback, not an override, because a platform often sets
``REDIS_URL`` for a cache that is not the job server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from environ.fileaware_mapping import FileAwareMapping

from django_wurk.core.config import Config, ConfigError, setting_names

ENV_PREFIX = "WURK_"


def settings_values() -> dict[str, Any]:
    values = getattr(settings, "WURK", {})
    if not isinstance(values, Mapping):
        raise ConfigError("WURK", f"settings.WURK must be a dict, got {type(values).__name__}")
    return dict(values)


def environment_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = FileAwareMapping(env=dict(os.environ if environ is None else environ), cache=False)
    found: dict[str, str] = {}
    for name in setting_names():
        value = _read(env, ENV_PREFIX + name)
        if value is not None:
            found[name] = value
    return found


def fallback_redis_url(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = FileAwareMapping(env=dict(os.environ if environ is None else environ), cache=False)
    value = _read(env, "REDIS_URL")
    return {"REDIS_URL": value} if value is not None else {}


def _read(env: FileAwareMapping, key: str) -> str | None:
    try:
        value = env[key]
    except KeyError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(key.removeprefix(ENV_PREFIX), f"cannot read {key}_FILE: {exc}") from None
    text = str(value)
    # A secret file usually ends with a newline; that one is not part of the value.
    return text.removesuffix("\n").removesuffix("\r") if key + "_FILE" in env.env else text


def build_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """The effective configuration; raises ``ConfigError`` naming the offending key."""
    merged: dict[str, Any] = {}
    merged.update(fallback_redis_url(environ))
    merged.update(settings_values())
    merged.update(environment_values(environ))
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Config.from_mapping(merged)
