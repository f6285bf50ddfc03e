"""Limits: every registered rate limiter with its use now (read-only).

Names come from ``lmtr-list`` (at most ``SCAN_CAP``, sorted, filtered by ``q``), and each
shown limiter costs two round trips (its description, its status), so a page of 25 reads
50 answers. Whatever the keys hold, a row renders: an unreadable limiter shows why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse

from django_wurk.core.engine import wurk
from django_wurk.core.features.limiters import LimiterInfo, LimiterSet
from django_wurk.dashboard.access import render_page
from django_wurk.dashboard.paging import PAGE_SIZES, pager

#: The most names a page reads from ``lmtr-list`` (then sorts, filters and pages).
SCAN_CAP = 10_000


@dataclass(frozen=True)
class Row:
    info: LimiterInfo

    @property
    def percent(self) -> str:
        """A CSS width, formatted here so no locale can turn the dot into a comma."""
        status = self.info.status
        if status is None or not status.limit:
            return "0"
        return f"{max(0.0, min(100.0, 100.0 * status.used / status.limit)):.2f}"

    @property
    def used(self) -> str:
        status = self.info.status
        if status is None:
            return ""
        return f"{status.used:g}" if status.used.is_integer() else f"{status.used:.2f}"

    @property
    def limit(self) -> str:
        status = self.info.status
        return "" if status is None or status.limit is None else f"{status.limit:g}"

    @property
    def full(self) -> bool:
        status = self.info.status
        return status is not None and not status.available

    @property
    def resets_in(self) -> float | None:
        status = self.info.status
        if status is None or status.reset_at is None:
            return None
        return max(0.0, status.reset_at - time.time())

    @property
    def options(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.info.options.items(), key=lambda kv: str(kv[0])))


def index(request: HttpRequest, site: AdminSite) -> HttpResponse:
    limiters = LimiterSet(wurk)
    query = request.GET.get("q", "").strip()[:200]
    found = limiters.names(limit=SCAN_CAP)
    if query:
        needle = query.encode("utf-8", "replace").lower()
        found = [name for name in found if needle in name.lower()]
    paging = pager(request)
    paging.total = len(found)
    shown = found[paging.start : paging.start + paging.count]
    context = {
        "rows": [Row(limiters.info(name)) for name in shown],
        "pager": paging,
        "page_sizes": PAGE_SIZES,
        "query": query,
        "scan_cap": SCAN_CAP,
        "capped": len(found) >= SCAN_CAP,
    }
    return render_page(request, site, "django_wurk/dashboard/limits.html", "Limits", context, tab="limits")
