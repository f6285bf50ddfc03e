"""The dashboard's place in the Django admin: a "Wurk" section whose one entry opens it,
and the periodic schedules edited at run time (``ScheduleAdmin``).

``Dashboard`` is an unmanaged model with no table; ``DashboardAdmin`` turns its changelist
into the dashboard and adds the other pages with ``get_urls()`` (the pattern django-rq and
Huey use). To show the dashboard on another admin site as well, register it there::

    from django_wurk.admin import DashboardAdmin
    from django_wurk.models import Dashboard

    my_site.register(Dashboard, DashboardAdmin)
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern

from django_wurk.dashboard.access import MANAGE_PERMISSION, VIEW_PERMISSION, can_view, guard
from django_wurk.dashboard.views import overview
from django_wurk.models import Dashboard, Schedule

__all__ = ["DashboardAdmin", "ScheduleAdmin"]


class DashboardAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_module_permission(self, request: HttpRequest) -> bool:
        user: Any = request.user
        return bool(user.has_perm(VIEW_PERMISSION) or user.has_perm(MANAGE_PERMISSION))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_view(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        from django_wurk.dashboard.urls import urlpatterns

        return list(urlpatterns(self.admin_site))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Reached only if someone routes to the stock changelist; the URL above already is the dashboard.
        return guard(self.admin_site, overview.dashboard, tab="dashboard")(request)


admin.site.register(Dashboard, DashboardAdmin)


class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Periodic schedules (docs/periodic.md): the stock admin, so Django's model permissions
    (``django_wurk.add_schedule``...) decide who may do what and every add, change and delete
    is written to the admin log. The form refuses a schedule that could not run
    (``Schedule.clean``). The ``WURK["PERIODIC"]`` entries are listed read-only beside the
    rows: they change with a deploy, not here."""

    list_display = ("name", "cron", "job", "queue", "tz", "enabled", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("name", "job")
    fields = ("name", "cron", "job", "args", "kwargs", "queue", "tz", "enabled")
    actions = ("enable", "disable")
    change_list_template = "admin/django_wurk/schedule/change_list.html"

    @admin.action(description="Enable the selected schedules", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable the selected schedules", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: Any, enabled: bool) -> None:
        # One save (and one admin-log entry) per schedule, as the change form would write.
        changed = 0
        for schedule in queryset:
            if schedule.enabled != enabled:
                schedule.enabled = enabled
                schedule.save(update_fields=["enabled", "updated_at"])
                self.log_change(request, schedule, [{"changed": {"fields": ["enabled"]}}])
                changed += 1
        verb = "enabled" if enabled else "disabled"
        self.message_user(request, f"{changed} schedule{'s' if changed != 1 else ''} {verb}.")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        from django_wurk.conf import app_settings

        try:
            settings_entries = list(app_settings().periodic)
        except Exception:  # a bad WURK is reported by `manage.py check`; the list still shows
            settings_entries = []
        context = {**(extra_context or {}), "settings_entries": settings_entries}
        return super().changelist_view(request, context)


admin.site.register(Schedule, ScheduleAdmin)
