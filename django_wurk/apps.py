"""The Django app: wire settings into the engine and discover every app's ``jobs`` module."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class WurkConfig(AppConfig):
    name = "django_wurk"
    label = "django_wurk"
    verbose_name = "Wurk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_wurk import checks  # noqa: F401 - registers the system checks
        from django_wurk.conf import build_config
        from django_wurk.engine import wurk

        # The configuration is built on first use, so an import or a `check` with a
        # broken setting reports it through the checks framework instead of crashing.
        wurk.set_config_loader(build_config)
        from django_wurk import transaction

        transaction.install(wurk)
        autodiscover_modules("jobs")
