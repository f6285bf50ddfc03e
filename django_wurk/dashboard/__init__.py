"""The operations dashboard, inside the Django admin.

``django_wurk.admin`` registers ``DashboardAdmin`` for the unmanaged ``Dashboard`` model, so
the admin's app list shows a "Wurk" section; its ``get_urls()`` adds the pages built by
``django_wurk.dashboard.urls``. Views are split by page family under ``views/``; ``access``
holds the permission, read-only and Redis-outage handling every view goes through; ``nav``
names the pages (URL names and tabs) and sits below all of them.
"""
