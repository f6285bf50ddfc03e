"""The dashboard's URLs, mounted by ``DashboardAdmin.get_urls()`` under the admin.

With the admin at ``/admin/`` they live under ``/admin/django_wurk/dashboard/``; every name
is ``admin:django_wurk_dashboard_<name>``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.urls import URLPattern, path, register_converter

from django_wurk.dashboard.access import guard
from django_wurk.dashboard.nav import url_name
from django_wurk.dashboard.views import (
    batches,
    busy,
    cancel,
    history,
    limits,
    metrics,
    overview,
    periodic,
    queues,
    sets,
)
from django_wurk.dashboard.views import status as job_status


class SetConverter:
    """``scheduled``, ``retries`` or ``dead``."""

    regex = "scheduled|retries|dead"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SetConverter, "wurk_set")


class TextConverter:
    """Any non-empty text, newlines and control characters included.

    Queue names, job classes and jids come from Redis, written by any client; Django's
    ``path`` converter (``.+``) stops at a newline, so a queue named ``"mail\n"`` had no URL
    and the page listing it failed to render.
    """

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TextConverter, "wurk_text")


def urlpatterns(site: AdminSite) -> list[URLPattern]:
    def page(view: Any, tab: str) -> Any:
        return guard(site, view, tab=tab)

    def action(view: Any, tab: str) -> Any:
        return guard(site, view, action=True, tab=tab)

    patterns = [
        path("", page(overview.dashboard, "dashboard"), name=url_name("changelist")),
        path("stats/", overview.stats_endpoint(site), name=url_name("stats")),
        path("busy/", page(busy.busy, "busy"), name=url_name("busy")),
        path("busy/signal/", action(busy.signal, "busy"), name=url_name("busy_signal")),
        path("job-actions/cancel/", action(cancel.cancel_job, "busy"), name=url_name("job_cancel")),
        path("queues/", page(queues.index, "queues"), name=url_name("queues")),
        # Actions name their queue in the form, so any queue name (even "a/b") has a page and actions.
        path("queues/<wurk_text:name>/", page(queues.detail, "queues"), name=url_name("queue")),
        path("queue-actions/delete/", action(queues.delete_job, "queues"), name=url_name("queue_delete")),
        path("queue-actions/clear/", action(queues.clear, "queues"), name=url_name("queue_clear")),
        path("queue-actions/pause/", action(queues.pause, "queues"), name=url_name("queue_pause")),
        path("queue-actions/unpause/", action(queues.unpause, "queues"), name=url_name("queue_unpause")),
        path("batches/", page(batches.index, "batches"), name=url_name("batches")),
        path("dead-batches/", page(batches.dead, "batches"), name=url_name("batches_dead")),
        path("batch-actions/cancel/", action(batches.cancel, "batches"), name=url_name("batch_cancel")),
        path("batches/<str:bid>/", page(batches.detail, "batches"), name=url_name("batch")),
        path(
            "batches/<str:bid>/status.json",
            guard(site, batches.status_json, as_json=True, tab="batches"),
            name=url_name("batch_status"),
        ),
        path("batches/<str:bid>/jobs/<str:jid>/", page(batches.job, "batches"), name=url_name("batch_job")),
        path("limits/", page(limits.index, "limits"), name=url_name("limits")),
        path("periodic/", page(periodic.index, "periodic"), name=url_name("periodic")),
        path("periodic/<str:lid>/", page(periodic.detail, "periodic"), name=url_name("loop")),
        path("periodic/<str:lid>/jobs/<str:jid>/", page(periodic.job, "periodic"), name=url_name("loop_job")),
        # Actions name their loop in the form, like the queue actions.
        path("periodic-actions/pause/", action(periodic.pause, "periodic"), name=url_name("loop_pause")),
        path(
            "periodic-actions/unpause/", action(periodic.unpause, "periodic"), name=url_name("loop_unpause")
        ),
        path(
            "periodic-actions/enqueue/",
            action(periodic.enqueue_now, "periodic"),
            name=url_name("loop_enqueue"),
        ),
        path("status/<wurk_text:jid>/", page(job_status.page, ""), name=url_name("job_status")),
        path("metrics/", page(metrics.index, "metrics"), name=url_name("metrics")),
        # Not under metrics/: any text there is a job class's name.
        path("history/", page(history.history, "metrics"), name=url_name("history")),
        path("metrics/<wurk_text:name>/", page(metrics.job_class, "metrics"), name=url_name("metrics_class")),
        # Actions on one entry or on selected ones post their <score>-<jid> keys to bulk/; "bulk"
        # and "all" contain no "-", so they can never be an entry's key.
        path("<wurk_set:kind>/bulk/", action(sets.bulk, ""), name=url_name("bulk")),
        path("<wurk_set:kind>/all/", action(sets.all_action, ""), name=url_name("all")),
        path("<wurk_set:kind>/<wurk_text:key>/", page(sets.detail, ""), name=url_name("entry")),
    ]
    # The three set listings also get a name each, so tabs and links can reverse them directly.
    for slug in sets.KINDS:
        patterns.append(
            path(f"{slug}/", page(sets.listing, slug), {"kind": slug}, name=url_name(slug)),
        )
    return patterns
