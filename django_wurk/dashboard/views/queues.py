"""Queues: sizes and latency; one queue's jobs page by page; delete a job; clear, pause, unpause a queue."""

from __future__ import annotations

import hashlib
from urllib.parse import unquote

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from django_wurk.core import api
from django_wurk.core.engine import wurk
from django_wurk.dashboard.access import audit, not_found, notify, render_page
from django_wurk.dashboard.nav import admin_url_name
from django_wurk.dashboard.paging import PAGE_SIZES, pager

#: Jobs on either side of the position a delete form was rendered at that are checked first.
SEARCH_WINDOW = 100
#: The most jobs a delete looks through when the job has moved far from where it was shown.
SEARCH_LIMIT = 100_000


def digest(raw: bytes) -> str:
    """Names one exact job value in a form (the queue is a list: a job has no other address)."""
    return hashlib.sha256(raw).hexdigest()[:32]


def _listing(site: AdminSite) -> str:
    """The queues page: where every queue action without a better place goes back to."""
    return reverse(admin_url_name("queues"), current_app=site.name)


def _no_queue_named(request: HttpRequest, site: AdminSite) -> HttpResponse:
    notify(request, messages.ERROR, "No queue named in the request.")
    return HttpResponseRedirect(_listing(site))


def index(request: HttpRequest, site: AdminSite) -> HttpResponse:
    rows = api.queue_summaries(wurk)
    context = {"rows": rows, "total": sum(r.size for r in rows), "here": request.get_full_path()}
    return render_page(request, site, "django_wurk/dashboard/queues.html", "Queues", context, tab="queues")


def detail(request: HttpRequest, site: AdminSite, name: str) -> HttpResponse:
    queue = api.Queue(name, wurk)
    if not queue.known():
        return not_found(
            request, site, f"No queue named “{name}”.", tab="queues", back=("All queues", _listing(site))
        )
    paging = pager(request)
    oldest_first = request.GET.get("order") == "oldest"
    paging.total = queue.size()
    if oldest_first:
        # The next job to run is at the tail of the list: read the page from the end.
        hi = paging.total - paging.start - 1
        lo = max(hi - paging.count + 1, 0)
        records = list(reversed(queue.page(lo, hi - lo + 1))) if hi >= 0 else []
        positions = list(range(hi, lo - 1, -1))
    else:
        records = queue.page(paging.start, paging.count)
        positions = list(range(paging.start, paging.start + len(records)))
    context = {
        "queue": queue,
        "paused": queue.paused(),
        "latency": queue.latency(),
        "jobs": [
            {"record": r, "digest": digest(r.raw), "position": pos}
            for r, pos in zip(records, positions, strict=False)
        ],
        "pager": paging,
        "page_sizes": PAGE_SIZES,
        "oldest_first": oldest_first,
        "here": request.get_full_path(),
        "crumbs": [("Queues", _listing(site))],
    }
    return render_page(
        request, site, "django_wurk/dashboard/queue.html", f"Queue “{name}”", context, tab="queues"
    )


def _find(queue: api.Queue, wanted: str, position: int) -> api.JobRecord | None:
    lo = max(position - SEARCH_WINDOW, 0)
    for record in queue.page(lo, 2 * SEARCH_WINDOW + 1):
        if digest(record.raw) == wanted:
            return record
    # The bytes alone, a thousand a read: decoding each job only to hash its bytes made a
    # search of 100,000 jobs cost seconds.
    for seen, raw in enumerate(queue.raw_jobs(page=1000)):
        if seen >= SEARCH_LIMIT:
            return None
        if digest(raw) == wanted:
            return api.JobRecord(raw, queue.name)
    return None


def delete_job(request: HttpRequest, site: AdminSite) -> HttpResponse:
    name = request.POST.get("name", "")
    if not name:
        return _no_queue_named(request, site)
    queue = api.Queue(name, wurk)
    back = request.POST.get("next", "")
    target = reverse(admin_url_name("queue"), kwargs={"name": name}, current_app=site.name)
    if back.startswith("?"):
        target += back
    try:
        position = int(request.POST.get("position", "0"))
    except ValueError:
        position = 0
    record = _find(queue, request.POST.get("digest", ""), position)
    if record is None or not queue.delete_job(record):
        notify(
            request, messages.WARNING, f"That job is no longer in queue “{name}” (it may have run already)."
        )
    else:
        audit(request, f"deleted job {record.jid or '(unreadable)'} from queue {name}")
        notify(request, messages.SUCCESS, f"Deleted {record.job_class} job {record.jid} from queue “{name}”.")
    return HttpResponseRedirect(target)


def clear(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """POST without ``confirm`` shows the confirmation page; with ``confirm=yes`` it clears."""
    name = request.POST.get("name", "")
    if not name:
        return _no_queue_named(request, site)
    queue = api.Queue(name, wurk)
    if request.POST.get("confirm") != "yes":
        size = queue.size()
        context = {
            "question": f"Delete all {size:,} job{'s' if size != 1 else ''} in queue “{name}”?",
            "detail": "They are removed from Redis and will not run. This cannot be undone.",
            "action_url": request.path,
            "fields": [("name", name)],
            "button": "Yes, clear the queue",
            "cancel_url": reverse(admin_url_name("queue"), kwargs={"name": name}, current_app=site.name),
            "crumbs": [("Queues", _listing(site))],
        }
        return render_page(
            request,
            site,
            "django_wurk/dashboard/confirm.html",
            f"Clear queue “{name}”",
            context,
            tab="queues",
        )
    size = queue.size()
    queue.clear()
    audit(request, f"cleared queue {name} ({size} jobs)")
    notify(
        request, messages.SUCCESS, f"Cleared queue “{name}”: {size:,} job{'s' if size != 1 else ''} deleted."
    )
    return HttpResponseRedirect(_listing(site))


def _back(request: HttpRequest, site: AdminSite, name: str) -> str:
    """Where a pause or unpause form goes back to: the queues list or this queue's page.

    ``next`` is the page the form was on. Only those two pages are accepted (with their query
    string, so a queue's page keeps its page and order); anything else, another site
    included, goes to the queues list. The redirect is always built from our own URLs.
    """
    listing = _listing(site)
    page = reverse(admin_url_name("queue"), kwargs={"name": name}, current_app=site.name)
    path, _, query = request.POST.get("next", "").partition("?")
    for known in (listing, page):
        if unquote(path) == unquote(known):
            return f"{known}?{query}" if query else known
    return listing


def _set_paused(request: HttpRequest, site: AdminSite, want_paused: bool) -> HttpResponse:
    name = request.POST.get("name", "")
    if not name:
        return _no_queue_named(request, site)
    queue = api.Queue(name, wurk)
    if want_paused:
        if queue.pause():
            audit(request, f"paused queue {name}")
            notify(
                request,
                messages.SUCCESS,
                f"Paused queue “{name}”: workers stop fetching from it; jobs stay queued.",
            )
        else:
            notify(request, messages.INFO, f"Queue “{name}” was already paused.")
    elif queue.unpause():
        audit(request, f"unpaused queue {name}")
        notify(request, messages.SUCCESS, f"Unpaused queue “{name}”: workers fetch from it again.")
    else:
        notify(request, messages.INFO, f"Queue “{name}” was not paused.")
    return HttpResponseRedirect(_back(request, site, name))


def pause(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """Pause a queue (Sidekiq Pro's ``pause!``). Reversible, so no confirmation page."""
    return _set_paused(request, site, want_paused=True)


def unpause(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """Unpause a queue (Sidekiq Pro's ``unpause!``)."""
    return _set_paused(request, site, want_paused=False)
