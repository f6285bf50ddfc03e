"""Batches: the list (search, paging), the dead batches, one batch's progress page, and cancelling.

A batch's page reads one status snapshot (one MULTI) and, for its lists, at most
``SHOWN`` jids or children each; a jid links through ``job`` to its retry or dead entry,
found when it is clicked (a jid says nothing about where its job is now).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import NoReverseMatch, reverse

from django_wurk.core import api
from django_wurk.core.engine import wurk
from django_wurk.core.features.batches import Batch, BatchSet, BatchStatus, DeadBatchSet, keys
from django_wurk.dashboard.access import audit, notify, render_page
from django_wurk.dashboard.nav import admin_url_name
from django_wurk.dashboard.paging import PAGE_SIZES, pager

#: A search collects at most this many batches...
SEARCH_CAP = 1000
#: ...from the descriptions of at most this many of the newest batches (a whole bid is found anywhere).
SEARCH_SCAN = 20_000
#: The most failed jids, dead jids and children a batch's page lists.
SHOWN = 100


@dataclass(frozen=True)
class Progress:
    """A batch's jobs split into what a progress bar shows, as counts and percentages."""

    succeeded: int
    failing: int
    dead: int
    waiting: int

    @classmethod
    def of(cls, status: BatchStatus) -> Progress:
        dead = min(status.dead, status.pending)
        failing = max(min(status.failures - status.dead, status.pending - dead), 0)
        return cls(
            succeeded=status.succeeded_jobs,
            failing=failing,
            dead=dead,
            waiting=max(status.pending - dead - failing, 0),
        )

    @property
    def total(self) -> int:
        return self.succeeded + self.failing + self.dead + self.waiting

    @property
    def unfinished(self) -> int:
        """Jobs still to finish: waiting, running or failing. Not Sidekiq's ``pending``, which
        also counts dead jobs, and so read "1 pending" beside "100% finished"."""
        return self.failing + self.waiting

    def percent(self, part: int) -> str:
        """A CSS width, formatted here so no locale can turn the dot into a comma."""
        return f"{100.0 * part / self.total:.2f}" if self.total else "0"

    @property
    def done_percent(self) -> str:
        return self.percent(self.succeeded + self.dead)

    @property
    def segments(self) -> list[tuple[str, str, int, str]]:
        """(css class, label, count, width) for each part of the bar."""
        return [
            ("wurk-bar-succeeded", "succeeded", self.succeeded, self.percent(self.succeeded)),
            ("wurk-bar-failing", "failing (will retry)", self.failing, self.percent(self.failing)),
            ("wurk-bar-dead", "dead", self.dead, self.percent(self.dead)),
            ("wurk-bar-waiting", "waiting or running", self.waiting, self.percent(self.waiting)),
        ]


def _listing(site: AdminSite) -> str:
    return reverse(admin_url_name("batches"), current_app=site.name)


def _page_url(site: AdminSite, bid: str) -> str:
    return reverse(admin_url_name("batch"), kwargs={"bid": bid}, current_app=site.name)


def _link(site: AdminSite, bid: str) -> str:
    """The page of a bid read from Redis, or "" when it is no batch id (an index or a set may
    hold anything, and such a bid has no page)."""
    return _page_url(site, bid) if keys.BID.match(bid) else ""


def _jid_link(site: AdminSite, bid: str, jid: str) -> str:
    try:
        return reverse(admin_url_name("batch_job"), kwargs={"bid": bid, "jid": jid}, current_app=site.name)
    except NoReverseMatch:  # "", or a "/" in it: a jid no job has, read from a set of junk
        return ""


def _check_bid(bid: str) -> str:
    if not keys.BID.match(bid):
        raise Http404("not a batch id")
    return bid


def _list(request: HttpRequest, site: AdminSite, dead: bool) -> HttpResponse:
    index = DeadBatchSet(wurk) if dead else BatchSet(wurk)
    paging = pager(request)
    query = request.GET.get("q", "").strip()[:200]
    if query:
        found = index.search(query, limit=SEARCH_CAP, scan=SEARCH_SCAN)
        paging.total = len(found)
        statuses = found[paging.start : paging.start + paging.count]
    else:
        paging.total, statuses = index.page(paging.start, paging.count)
    context = {
        "rows": [(s, Progress.of(s), _link(site, s.bid)) for s in statuses],
        "pager": paging,
        "page_sizes": PAGE_SIZES,
        "query": query,
        "truncated": bool(query) and paging.total >= SEARCH_CAP,
        "search_cap": SEARCH_CAP,
        "search_scan": SEARCH_SCAN,
        "dead": dead,
    }
    title = "Dead batches" if dead else "Batches"
    return render_page(request, site, "django_wurk/dashboard/batches.html", title, context, tab="batches")


def index(request: HttpRequest, site: AdminSite) -> HttpResponse:
    return _list(request, site, dead=False)


def dead(request: HttpRequest, site: AdminSite) -> HttpResponse:
    return _list(request, site, dead=True)


def detail(request: HttpRequest, site: AdminSite, bid: str) -> HttpResponse:
    status = BatchStatus(_check_bid(bid), wurk)
    crumbs = [("Batches", _listing(site))]
    if not status.exists:
        return render_page(
            request,
            site,
            "django_wurk/dashboard/batch.html",
            f"Batch {bid}",
            {"status": status, "crumbs": crumbs},
            tab="batches",
            status=404,
        )
    dead_jids = status.dead_jids
    dead_set = set(dead_jids)
    failing = [jid for jid in status.failed_jids if jid not in dead_set]
    children = status.child_bids
    context = {
        "status": status,
        "progress": Progress.of(status),
        "callbacks": status.callbacks,
        "failing": [(jid, _jid_link(site, bid, jid)) for jid in failing[:SHOWN]],
        "failing_more": max(len(failing) - SHOWN, 0),
        "dead_jids": [(jid, _jid_link(site, bid, jid)) for jid in dead_jids[:SHOWN]],
        "dead_more": max(len(dead_jids) - SHOWN, 0),
        "children": [
            (c, Progress.of(c), _link(site, c.bid))
            for c in (BatchStatus(child, wurk) for child in children[:SHOWN])
        ],
        "parent_link": _link(site, status.parent_bid or ""),
        "children_more": max(len(children) - SHOWN, 0),
        "crumbs": crumbs,
        "status_url": reverse(admin_url_name("batch_status"), kwargs={"bid": bid}, current_app=site.name),
    }
    title = f"Batch {bid}"
    return render_page(request, site, "django_wurk/dashboard/batch.html", title, context, tab="batches")


def status_json(request: HttpRequest, site: AdminSite, bid: str) -> HttpResponse:
    """The batch's status as JSON (what the progress page polls; Sidekiq Pro has the same)."""
    if not keys.BID.match(bid):  # JSON like every answer of this URL, for the page's poller
        return JsonResponse({"error": "not_a_batch_id"}, status=404)
    status = BatchStatus(bid, wurk)
    if not status.exists:
        return JsonResponse({"error": "no_such_batch", "bid": bid}, status=404)
    progress = Progress.of(status)
    data = status.data()
    data["progress"] = {
        "succeeded": progress.succeeded,
        "failing": progress.failing,
        "dead": progress.dead,
        "waiting": progress.waiting,
        "unfinished": progress.unfinished,
        "done_percent": progress.done_percent,
    }
    return JsonResponse(data)


def job(request: HttpRequest, site: AdminSite, bid: str, jid: str) -> HttpResponse:
    """Send a failed or dead jid of the batch to its entry in the retry or dead set."""
    _check_bid(bid)
    for kind, sset in (("retries", api.RetrySet(wurk)), ("dead", api.DeadSet(wurk))):
        entry = sset.find_job(jid)
        if entry is not None:
            where = {"kind": kind, "key": entry.key}
            return HttpResponseRedirect(reverse(admin_url_name("entry"), kwargs=where, current_app=site.name))
    notify(request, messages.WARNING, f"Job {jid} is no longer in the retry set or the dead set.")
    return HttpResponseRedirect(_page_url(site, bid))


def cancel(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """Cancel a batch: its jobs and its children's see ``valid_within_batch()`` False."""
    bid = request.POST.get("bid", "")
    if not keys.BID.match(bid):
        notify(request, messages.ERROR, "No batch named in the request.")
        return HttpResponseRedirect(_listing(site))
    if Batch(bid=bid, wurk=wurk).invalidate_all():
        audit(request, f"invalidated batch {bid}")
        notify(request, messages.SUCCESS, f"Batch {bid} is cancelled: jobs that check it skip their work.")
    else:
        notify(request, messages.WARNING, f"Batch {bid} no longer exists (it expired).")
    return HttpResponseRedirect(_page_url(site, bid))
