"""The Metrics tab's History: the leader's snapshots of the fleet over days (docs/metrics.md).

Charts are drawn from at most ``CHART_POINTS`` snapshots spread over the period
(``History.sample``: one round trip, whatever the period); the executions between two drawn
points come from the running totals the snapshots keep, so sampling loses no executions.
Everything read is what ``History`` made safe (junk counts are ``None``, drawn as 0 and
shown as "—"), and every text goes through the
template's or ``charts``' escaping.
"""

from __future__ import annotations

import itertools

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse

from django_wurk.conf import app_settings
from django_wurk.core.config import ConfigError
from django_wurk.core.engine import wurk
from django_wurk.core.features.history import History, Snapshot
from django_wurk.core.features.periodic import current_leader
from django_wurk.dashboard import charts
from django_wurk.dashboard.access import render_page

#: (query value, label, seconds); the first is the default.
PERIODS = (
    ("1h", "1 hour", 3600),
    ("24h", "24 hours", 86_400),
    ("7d", "7 days", 7 * 86_400),
    ("30d", "30 days", 30 * 86_400),
)
#: Snapshots drawn per chart, at most.
CHART_POINTS = 240
#: Rows of the table (the newest snapshots).
TABLE_ROWS = 50
#: Queues whose latency is drawn (the largest in the newest snapshot).
CHART_QUEUES = 6
#: The gauges drawn in the sizes chart: (field, label, colour).
SIZES = (
    ("enqueued", "Enqueued", "c0"),
    ("scheduled", "Scheduled", "c1"),
    ("retries", "Retries", "c2"),
    ("dead", "Dead", "failed"),
    ("busy", "Busy", "c3"),
)


def _period(request: HttpRequest) -> tuple[str, str, int]:
    wanted = request.GET.get("period", "")
    return next((p for p in PERIODS if p[0] == wanted), PERIODS[0])


def _between(now: int | None, before: int | None) -> int:
    return now - before if now is not None and before is not None and now >= before else 0


def _labels(rows: list[Snapshot]) -> list[str]:
    """The x labels: with the date when the rows span more than a day, with seconds when
    the six labelled ones would be under a minute apart (a few minutes of snapshots)."""
    if not rows:
        return []
    span = (rows[-1].at - rows[0].at).total_seconds()
    fmt = "%m-%d %H:%M" if span > 86_400 else "%H:%M:%S" if span < 5 * 60 else "%H:%M"
    return [f"{r.at:{fmt}}" for r in rows]


def history(request: HttpRequest, site: AdminSite) -> HttpResponse:
    code, label, seconds = _period(request)
    reader = History(wurk)
    drawn = reader.sample(seconds, CHART_POINTS)
    # One more than shown: the oldest shown row gets its delta from the one before it.
    table = reader.recent(seconds, limit=TABLE_ROWS + 1)[-TABLE_ROWS:]
    labels = _labels(drawn)
    context: dict[str, object] = {
        "periods": PERIODS,
        "period_code": code,
        "period_label": label,
        "kept": reader.size(),
        "table": list(reversed(table)),
        "leader": current_leader(wurk),
    }
    try:
        app = app_settings()
        context["interval"], context["retention"] = app.history_interval, app.history_retention
    except ConfigError:
        pass
    if len(drawn) >= 2:
        pairs = list(itertools.pairwise(drawn))
        # Over the same x positions as the charts below it (the first snapshot has no delta:
        # no point there), so a moment lines up across the three charts.
        processed: list[float | None] = [None, *(_between(b.processed, a.processed) for a, b in pairs)]
        failed: list[float | None] = [None, *(_between(b.failed, a.failed) for a, b in pairs)]
        context["executions"] = charts.line_chart(
            labels,
            [charts.Series("Processed", processed, "processed"), charts.Series("Failed", failed, "failed")],
            title="Executions between snapshots",
        )
    if drawn:
        context["sizes"] = charts.line_chart(
            labels,
            [charts.Series(name, [getattr(r, field) or 0 for r in drawn], css) for field, name, css in SIZES],
            title="Queue and set sizes",
        )
        queues = [q.name for q in drawn[-1].queues[:CHART_QUEUES]]
        if queues:
            series = []
            for i, name in enumerate(queues):
                values = []
                for r in drawn:
                    gauge = r.queue(name)
                    values.append(round(gauge.latency, 2) if gauge is not None else 0)
                series.append(charts.Series(name, values, f"c{i}"))
            context["latency"] = charts.line_chart(
                labels, series, title="Queue latency", unit=" s", height=180
            )
            context["latency_keys"] = [(f"c{i}", name) for i, name in enumerate(queues)]
    return render_page(
        request, site, "django_wurk/dashboard/history.html", "Metrics history", context, tab="metrics"
    )
