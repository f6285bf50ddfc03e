"""The Django app: wire settings into the engine and discover every app's ``jobs`` module."""

from __future__ import annotations

import sys
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import autodiscover_modules


class WurkConfig(AppConfig):
    name = "django_wurk"
    label = "django_wurk"
    verbose_name = "Wurk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_wurk import checks  # noqa: F401 - registers the system checks
        from django_wurk.conf import build_config
        from django_wurk.core.engine import wurk

        # The configuration is built on first use, so an import or a `check` with a
        # broken setting reports it through the checks framework instead of crashing.
        wurk.set_config_loader(build_config)
        from django_wurk import transaction

        transaction.install(wurk)
        _install_tracing(wurk)
        autodiscover_modules("jobs")
        # django.tasks functions conventionally live in tasks.py; import them so a worker
        # knows every task it may be handed (only when a backend of ours is configured).
        tasks_setting = getattr(settings, "TASKS", {}) or {}
        if any(str(b.get("BACKEND", "")).startswith("django_wurk.") for b in tasks_setting.values()):
            autodiscover_modules("tasks")
        # Celery-style projects call app.autodiscover_tasks(); django_wurk.celery imports no
        # Django, so it asks us: for the names asked so far, and from now on at once.
        celery_tasks = sys.modules.get("django_wurk.celery.task")
        if celery_tasks is not None:
            celery_tasks.set_discoverer(autodiscover_modules)


def _install_tracing(wurk: Any) -> None:
    """``WURK["TRACING"]``: in every process, since web processes enqueue and workers perform."""
    from django_wurk.conf import build_settings
    from django_wurk.core.config import ConfigError

    try:
        tracing = build_settings().tracing  # not kept: app_settings() is built on first use
    except ConfigError:
        return  # the checks report a bad setting by name
    if tracing:
        try:
            from django_wurk.core.features.observability import tracing as otel
        except ImportError:
            return  # check E007 says what to install
        otel.install(wurk)
