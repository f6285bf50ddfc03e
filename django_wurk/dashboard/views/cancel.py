"""Cancel one job by jid, from the Busy page (running jobs) and a queue's page.

The scheduled and retry pages cancel through their own bulk form (``sets.py``), which
addresses entries as those pages do. Both call ``django_wurk.cancel``: a waiting job is
removed and never runs; a running one is told to stop and stopped after the grace
(docs/cancel.md). A job that is no longer anywhere is said to be gone, not cancelled.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from django_wurk.core.engine import wurk
from django_wurk.core.features.cancel import CancelError, cancel
from django_wurk.dashboard.access import audit, notify
from django_wurk.dashboard.nav import admin_url_name


def _back(request: HttpRequest, site: AdminSite) -> str:
    """Where the form came from: a queue's page (``name``, and its ``next`` query) or Busy.
    Built here from names, never taken from the request as a URL (no open redirect)."""
    name = request.POST.get("name", "")
    if request.POST.get("from") == "queue" and name:
        target = reverse(admin_url_name("queue"), kwargs={"name": name}, current_app=site.name)
        back = request.POST.get("next", "")
        return target + back if back.startswith("?") else target
    return reverse(admin_url_name("busy"), current_app=site.name)


def cancel_job(request: HttpRequest, site: AdminSite) -> HttpResponse:
    back = HttpResponseRedirect(_back(request, site))
    jid = request.POST.get("jid", "")
    if not jid:
        notify(request, messages.ERROR, "No job named in the request.")
        return back
    try:
        found = cancel(jid, wurk)
    except (ValueError, CancelError) as exc:
        notify(request, messages.ERROR, f"Could not cancel job {jid}: {exc}")
        return back
    if found:
        audit(request, f"cancelled job {jid}")
        notify(
            request,
            messages.SUCCESS,
            f"Cancelled job {jid}. If it was running, it is told to stop, and stopped if it has not "
            "within the cancel grace.",
        )
    else:
        audit(request, f"cancel of job {jid}: no longer waiting or running")
        notify(
            request,
            messages.WARNING,
            f"Job {jid} is no longer waiting or running (it may have finished). It is marked "
            "cancelled, so it will not start if it turns up again.",
        )
    return back
