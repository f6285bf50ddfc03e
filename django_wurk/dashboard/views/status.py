"""A tracked job's status page (``track=True``): its state, progress, result or error.

Reached by jid (``status/<jid>/``), from the data API's ``JobStatus``; nothing on it is
trusted markup: the hash may hold anything anyone wrote, and the template escapes it all.
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse

from django_wurk.core.engine import wurk
from django_wurk.core.features.status import JobStatus
from django_wurk.core.wire import dumps
from django_wurk.dashboard.access import render_page


def page(request: HttpRequest, site: AdminSite, jid: str) -> HttpResponse:
    status = JobStatus.get(jid, wurk)
    context = {"jid": jid, "status": status, "result": None}
    if status is not None and status.result is not None:
        context["result"] = dumps(status.result)
    code = 200 if status is not None else 404
    return render_page(request, site, "django_wurk/dashboard/status.html", f"Job {jid}", context, status=code)
