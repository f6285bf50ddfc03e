"""The Django app: wire settings into the engine and discover every app's ``jobs`` module.

Until ``ready()`` has run, the engine's configuration loader is ``config_before_ready``,
which the package installs when it is imported: a push from a project that forgot
``"django_wurk"`` in ``INSTALLED_APPS`` (or that pushes before ``django.setup()``) then
fails, saying so, instead of going to ``redis://127.0.0.1:6379/0`` with ``settings.WURK``,
the ``jobs`` modules and the on-commit delivery all unread.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from django_wurk.core.config import Config


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
        from django_wurk import signals

        wurk.use(signals.FEATURE)  # the worker's and the jobs' moments, as Django signals
        _install_tracing(wurk)
        autodiscover_modules("jobs")
        # django.tasks functions conventionally live in tasks.py; import them so a worker
        # knows every task it may be handed (only when a backend of ours is configured).
        if tasks_backend_configured():
            autodiscover_modules("tasks")
        # Celery-style projects call app.autodiscover_tasks(); django_wurk.celery imports no
        # Django, so it asks us: for the names asked so far, and from now on at once.
        celery_tasks = sys.modules.get("django_wurk.celery.task")
        if celery_tasks is not None:
            celery_tasks.set_discoverer(autodiscover_modules)
        from django_wurk.core.registry import registry

        registry.mark_discovered()  # every worker knows these; checks.check_job_modules, the rest


def tasks_backend_configured() -> bool:
    """Whether ``settings.TASKS`` names a backend of ours (``django_wurk.tasks.WurkBackend``)."""
    tasks_setting = getattr(settings, "TASKS", None) if settings.configured else None
    if not isinstance(tasks_setting, dict):
        return False
    return any(
        isinstance(b, dict) and str(b.get("BACKEND", "")).startswith("django_wurk.")
        for b in tasks_setting.values()
    )


def config_before_ready() -> Config:
    """The engine's configuration loader until ``WurkConfig.ready()`` installs the real one.

    Reached only when something needs the configuration (a push, a read) before the app is
    ready: always a mistake, and one that used to pass silently with the defaults.
    """
    from django.apps import apps
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if not settings.configured:
        raise ImproperlyConfigured(
            "django_wurk is used before Django's settings are configured: set DJANGO_SETTINGS_MODULE"
            " and call django.setup() first (outside Django, give the engine its configuration with"
            " django_wurk.wurk.configure(Config(...)))"
        )
    if apps.apps_ready and not apps.is_installed("django_wurk"):
        raise ImproperlyConfigured(
            'add "django_wurk" to INSTALLED_APPS: without its app nothing reads settings.WURK or'
            " the WURK_* environment, no jobs module is imported and pushes do not wait for the"
            " transaction's commit"
        )
    raise ImproperlyConfigured(
        "django_wurk is used before Django has loaded its apps (a push at import time of a models"
        " or apps module?): push once django.setup() has returned"
    )


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
        wurk.use(otel.FEATURE)
