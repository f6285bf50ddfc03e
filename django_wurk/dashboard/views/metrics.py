"""Metrics: executions, failures and time per job class (Sidekiq 8's metrics keys)."""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from django_wurk.core import metrics
from django_wurk.core.engine import wurk
from django_wurk.dashboard import charts
from django_wurk.dashboard.access import render_page
from django_wurk.dashboard.nav import admin_url_name

#: (query value, label, minutes); the first is the default.
PERIODS = (("1h", "1 hour", 60), ("8h", "8 hours", 480), ("24h", "24 hours", 1440))
#: Classes drawn in the overview chart (the busiest ones).
CHART_CLASSES = 6


def _period(request: HttpRequest) -> tuple[str, str, int]:
    wanted = request.GET.get("period", "")
    return next((p for p in PERIODS if p[0] == wanted), PERIODS[0])


def _labels(period: metrics.Period) -> list[str]:
    fmt = "%H:%M"
    return [f"{at:{fmt}}" for at in period.buckets]


def index(request: HttpRequest, site: AdminSite) -> HttpResponse:
    code, label, minutes = _period(request)
    query = request.GET.get("q", "").strip()[:200]
    result = metrics.overview(minutes, wurk=wurk)
    classes = [c for c in result.classes if query.lower() in c.name.lower()] if query else result.classes
    chart = charts.line_chart(
        _labels(result.period),
        [
            charts.Series(c.name, [s.processed for s in c.series], f"c{i}")
            for i, c in enumerate(classes[:CHART_CLASSES])
        ],
        title=f"Executions per {'minute' if result.period.minutely else '10 minutes'}, busiest classes",
    )
    context = {
        "classes": classes,
        "charted": [(f"c{i}", c.name) for i, c in enumerate(classes[:CHART_CLASSES])],
        "chart": chart,
        "periods": PERIODS,
        "period_code": code,
        "period_label": label,
        "period": result.period,
        "query": query,
        "processed": sum(c.processed for c in classes),
        "failed": sum(c.failed for c in classes),
    }
    return render_page(request, site, "django_wurk/dashboard/metrics.html", "Metrics", context, tab="metrics")


def job_class(request: HttpRequest, site: AdminSite, name: str) -> HttpResponse:
    code, label, minutes = _period(request)
    detail = metrics.job_class(name, minutes, wurk=wurk)
    m = detail.metrics
    chart = charts.line_chart(
        _labels(detail.period),
        [
            charts.Series("Succeeded", [max(s.processed - s.failed, 0) for s in m.series], "processed"),
            charts.Series("Failed", [s.failed for s in m.series], "failed"),
        ],
        title=f"Executions of {name}",
    )
    timing = charts.line_chart(
        _labels(detail.period),
        [
            charts.Series(
                "Average time",
                [
                    round(s.ms / (s.processed - s.failed), 1) if s.processed > s.failed else 0
                    for s in m.series
                ],
                "c2",
            )
        ],
        title=f"Average execution time of {name}",
        unit=" ms",
        height=180,
    )
    histogram = charts.bar_chart(
        metrics.histogram_labels(), detail.histogram, title=f"Execution-time histogram of {name}", css="c0"
    )
    context = {
        "name": name,
        "m": m,
        "chart": chart,
        "timing": timing,
        "histogram": histogram,
        "detail": detail,
        "periods": PERIODS,
        "period_code": code,
        "period_label": label,
        "histogram_partial": minutes > metrics.MINUTELY_LIMIT,
        "crumbs": [
            ("Metrics", reverse(admin_url_name("metrics"), current_app=site.name) + f"?period={code}")
        ],
    }
    return render_page(
        request, site, "django_wurk/dashboard/metrics_class.html", name, context, tab="metrics"
    )
