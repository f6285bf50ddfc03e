"""Periodic: the registered loops and the leader; one loop's options and history; pause,
unpause and enqueue now.

Everything shown is what the leader registered in Redis (``LoopSet``), so a web process
whose settings differ from the fleet's shows the fleet's loops. A loop can vanish at any
moment (a new leader prunes what its settings no longer have): an action on one that has
gone says so and changes nothing.
A history jid links through ``job``, which looks for the job when it is clicked (a jid says
nothing about where its job is now), as a batch's page does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from urllib.parse import unquote
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse

from django_wurk.core import api
from django_wurk.core.engine import UnknownJobError, wurk
from django_wurk.core.features.periodic import Loop, LoopSet, current_leader, keys
from django_wurk.dashboard.access import audit, not_found, notify, render_page
from django_wurk.dashboard.nav import admin_url_name

#: The most jobs of a loop's queue that ``job`` looks through for a jid (a queue may be huge).
QUEUE_SEARCH_LIMIT = 10_000


@dataclass(frozen=True)
class Leader:
    """Who fires the loops now: the identity in the leader key, and whether that is a live process."""

    identity: str | None
    #: The identity is among the processes sending heartbeats (Busy lists it).
    running: bool


def leader() -> Leader:
    identity = current_leader(wurk)
    if identity is None:
        return Leader(None, running=False)
    # Iterated, not ``identities()``: a name in ``processes`` whose hash is gone is no live process.
    return Leader(identity, running=any(p.identity == identity for p in api.ProcessSet(wurk)))


def _listing(site: AdminSite) -> str:
    return reverse(admin_url_name("periodic"), current_app=site.name)


def _link(site: AdminSite, lid: str) -> str:
    """The loop's page, or "" for an id no URL can hold ("", a "/" in a junk member)."""
    try:
        return reverse(admin_url_name("loop"), kwargs={"lid": lid}, current_app=site.name)
    except NoReverseMatch:
        return ""


def _jid_link(site: AdminSite, lid: str, jid: str) -> str:
    try:
        return reverse(admin_url_name("loop_job"), kwargs={"lid": lid, "jid": jid}, current_app=site.name)
    except NoReverseMatch:  # "", or a "/" in it: a jid no job has, read from a history of junk
        return ""


def _zone(name: str) -> ZoneInfo | None:
    """The loop's time zone, or None when its hash names none that exists (junk, or a zone
    this machine's tz database lacks)."""
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, LookupError):  # ZoneInfoNotFoundError is a KeyError
        return None


def _local(moment: datetime | None, zone: ZoneInfo | None) -> str:
    """A fire time on the loop's own clock (what its cron fields mean), e.g. ``2026-03-01 09:00 CET``."""
    if moment is None or zone is None:
        return ""
    try:
        return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
    except (OverflowError, ValueError):
        return ""


def index(request: HttpRequest, site: AdminSite) -> HttpResponse:
    loops = list(LoopSet(wurk))
    context = {
        "rows": [(loop, _link(site, loop.lid)) for loop in loops],
        "paused": sum(1 for loop in loops if loop.paused),
        "leader": leader(),
        "here": request.get_full_path(),
    }
    return render_page(
        request, site, "django_wurk/dashboard/periodic.html", "Periodic", context, tab="periodic"
    )


def detail(request: HttpRequest, site: AdminSite, lid: str) -> HttpResponse:
    loop = LoopSet(wurk).get(lid)
    if loop is None:
        return not_found(
            request,
            site,
            f"No periodic loop “{lid}” is registered (a leader whose settings no longer have it pruned it).",
            tab="periodic",
            back=("All loops", _listing(site)),
        )
    zone = _zone(loop.tz)
    context = {
        "loop": loop,
        "zone_known": zone is not None,
        "last_local": _local(loop.last_fire, zone),
        "next_local": _local(loop.next_fire, zone),
        "history": [(fire, _jid_link(site, lid, fire.jid)) for fire in loop.history()],
        "history_max": keys.HISTORY_MAX,
        "leader": leader(),
        "crumbs": [("Periodic", _listing(site))],
        "here": request.get_full_path(),
    }
    return render_page(
        request, site, "django_wurk/dashboard/loop.html", f"Loop {lid}", context, tab="periodic"
    )


def job(request: HttpRequest, site: AdminSite, lid: str, jid: str) -> HttpResponse:
    """Send a jid of the loop's history to where its job is now: the retry or dead set's entry,
    Busy while it runs, its queue while it waits; else back to the loop, saying so."""
    for kind, sset in (("retries", api.RetrySet(wurk)), ("dead", api.DeadSet(wurk))):
        entry = sset.find_job(jid)
        if entry is not None:
            where = {"kind": kind, "key": entry.key}
            return HttpResponseRedirect(reverse(admin_url_name("entry"), kwargs=where, current_app=site.name))
    if any(running.record.jid == jid for running in api.Workers(wurk)):
        notify(request, messages.INFO, f"Job {jid} is running now.")
        return HttpResponseRedirect(reverse(admin_url_name("busy"), current_app=site.name))
    loop = LoopSet(wurk).get(lid)
    if loop is not None and loop.queue:
        queue = api.Queue(loop.queue, wurk)
        if any(record.jid == jid for record in islice(queue, QUEUE_SEARCH_LIMIT)):
            notify(request, messages.INFO, f"Job {jid} is waiting in queue “{loop.queue}”.")
            return HttpResponseRedirect(
                reverse(admin_url_name("queue"), kwargs={"name": loop.queue}, current_app=site.name)
            )
    notify(
        request,
        messages.WARNING,
        f"Job {jid} is not waiting, running, in the retry set or in the dead set: it has probably run.",
    )
    page = _link(site, lid) if loop is not None else ""
    return HttpResponseRedirect(page or _listing(site))


# Actions ----------------------------------------------------------------------------------------


def _back(request: HttpRequest, site: AdminSite, lid: str) -> str:
    """Where an action goes back to: the page its form was on, if that is the Periodic tab or
    this loop's page; anything else (another site included) goes to the tab."""
    listing = _listing(site)
    candidates = [listing]
    page = _link(site, lid)
    if page:
        candidates.append(page)
    path = request.POST.get("next", "").partition("?")[0]
    for known in candidates:
        if unquote(path) == unquote(known):
            return known
    return listing


def _registered(request: HttpRequest, site: AdminSite) -> tuple[Loop | None, HttpResponse | None]:
    """The loop the form names, or the answer saying it is not there (any more)."""
    lid = request.POST.get("lid", "")
    if not lid:
        notify(request, messages.ERROR, "No loop named in the request.")
        return None, HttpResponseRedirect(_listing(site))
    loop = LoopSet(wurk).get(lid)
    if loop is None:
        return None, _gone(request, site, lid)
    return loop, None


def _gone(request: HttpRequest, site: AdminSite, lid: str) -> HttpResponse:
    notify(
        request,
        messages.WARNING,
        f"Loop {lid} is no longer registered (a leader whose settings no longer have it pruned it): "
        "nothing was changed.",
    )
    return HttpResponseRedirect(_listing(site))


def _set_paused(request: HttpRequest, site: AdminSite, want_paused: bool) -> HttpResponse:
    loop, answer = _registered(request, site)
    if loop is None:
        return answer  # type: ignore[return-value]
    name = f"{loop.lid} ({loop.job})"
    if loop.paused == want_paused:
        state = "paused" if want_paused else "not paused"
        notify(request, messages.INFO, f"Loop {name} was already {state}.")
    elif not (loop.pause() if want_paused else loop.unpause()):
        return _gone(request, site, loop.lid)  # pruned between reading it and writing it
    elif want_paused:
        audit(request, f"paused loop {name}")
        notify(request, messages.SUCCESS, f"Paused loop {name}: its occurrences are skipped until unpaused.")
    else:
        audit(request, f"unpaused loop {name}")
        notify(request, messages.SUCCESS, f"Unpaused loop {name}: it fires again from its next occurrence.")
    return HttpResponseRedirect(_back(request, site, loop.lid))


def pause(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """Pause a loop. Reversible (and a paused loop saves nothing up), so no confirmation."""
    return _set_paused(request, site, want_paused=True)


def unpause(request: HttpRequest, site: AdminSite) -> HttpResponse:
    return _set_paused(request, site, want_paused=False)


def enqueue_now(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """Push the loop's job once, now, as a fire would; the schedule is left alone."""
    loop, answer = _registered(request, site)
    if loop is None:
        return answer  # type: ignore[return-value]
    name = f"{loop.lid} ({loop.job})"
    try:
        jid = loop.enqueue_now()
    except UnknownJobError:
        notify(
            request,
            messages.ERROR,
            f"Loop {name} cannot be enqueued from here: no job is registered as “{loop.job}” in this "
            "web process (only registered jobs are pushed).",
        )
    except ValueError as exc:
        notify(request, messages.ERROR, f"Loop {name} cannot be enqueued: {exc}.")
    else:
        if jid is None:
            notify(
                request,
                messages.WARNING,
                f"Loop {name}: a client middleware dropped the job; nothing was pushed.",
            )
        else:
            audit(request, f"enqueued loop {name} now: jid {jid}")
            notify(
                request, messages.SUCCESS, f"Enqueued loop {name} now: job {jid} is on queue “{loop.queue}”."
            )
    return HttpResponseRedirect(_back(request, site, loop.lid))
