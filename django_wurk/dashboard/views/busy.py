"""Busy: the processes and what each is running; quiet or stop one process or all; cancel a
running job (``views/cancel.py``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from django_wurk.core import api, wire
from django_wurk.core.engine import wurk
from django_wurk.core.features.periodic import current_leader
from django_wurk.dashboard.access import audit, notify, render_page
from django_wurk.dashboard.nav import admin_url_name

ALL = "*"
SIGNALS = {"quiet": "quieted", "stop": "told to stop"}


def busy(request: HttpRequest, site: AdminSite) -> HttpResponse:
    processes = list(api.ProcessSet(wurk))
    # Read once for the page, not once per process; and no leader marks nobody (not a
    # process whose identity happens to read as "").
    leader = current_leader(wurk)
    rows = [
        {
            "process": p,
            "leader": leader is not None and p.identity == leader,
            "embedded": p.embedded,
            "labels": p.labels,
            "version": p.version,
        }
        for p in processes
    ]
    # A link per running job: reversed once per queue, not once per row (100 processes of
    # 10 threads are 1,000 rows, and reversing was a fifth of the page's time).
    queue_urls: dict[str, str] = {}

    def queue_url(name: str) -> str:
        if name and name not in queue_urls:
            queue_urls[name] = reverse(admin_url_name("queue"), kwargs={"name": name}, current_app=site.name)
        return queue_urls.get(name, "")

    jobs = [
        {
            "job": j,
            "started": wire.read_stamp(j.run_at) if j.run_at else None,
            "queue_url": queue_url(j.queue),
        }
        for j in sorted(api.Workers(wurk), key=lambda j: (j.run_at, j.identity, j.tid))
    ]
    context = {
        "rows": rows,
        "jobs": jobs,
        "total_threads": sum(p.concurrency for p in processes),
        "total_busy": sum(p.busy for p in processes),
        "total_rss": sum(p.rss for p in processes),
        "all_value": ALL,
        "signal_url": reverse(admin_url_name("busy_signal"), current_app=site.name),
        "cancel_url": reverse(admin_url_name("job_cancel"), current_app=site.name),
        "periodic_url": reverse(admin_url_name("periodic"), current_app=site.name),
    }
    return render_page(request, site, "django_wurk/dashboard/busy.html", "Busy", context, tab="busy")


def signal(request: HttpRequest, site: AdminSite) -> HttpResponse:
    back = HttpResponseRedirect(reverse(admin_url_name("busy"), current_app=site.name))
    what = request.POST.get("signal", "")
    identity = request.POST.get("identity", "")
    if what not in SIGNALS or not identity:
        notify(request, messages.ERROR, "Unknown request: choose Quiet or Stop for a process.")
        return back
    processes = list(api.ProcessSet(wurk))
    if identity == ALL:
        targets = [p for p in processes if not p.embedded]
        if not targets:
            notify(request, messages.WARNING, "There are no processes to signal.")
            return back
    else:
        targets = [p for p in processes if p.identity == identity]
        if not targets:
            notify(request, messages.WARNING, f"Process {identity} is no longer running.")
            return back
        if targets[0].embedded:
            notify(request, messages.WARNING, f"Process {identity} is embedded and cannot be signalled.")
            return back
    api.signal_each(targets, "TSTP" if what == "quiet" else "TERM")
    names = ", ".join(p.identity for p in targets)
    audit(request, f"sent {what} to {names}")
    if identity == ALL:
        text = f"{len(targets)} process{'es' if len(targets) != 1 else ''} {SIGNALS[what]}."
    else:
        text = f"Process {identity} {SIGNALS[what]}."
    notify(request, messages.SUCCESS, text + " It acts on its next heartbeat.")
    return back
