"""URLs for bench/dashboard_scale.py: the admin, where the dashboard lives."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
