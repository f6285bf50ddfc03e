"""The dashboard's place in the Django admin: a "Wurk" section whose one entry opens it.

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
from django_wurk.models import Dashboard

__all__ = ["DashboardAdmin"]


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
