"""The dashboard's front page (counters, live throughput, history, Redis) and the JSON stats."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.views.decorators.cache import never_cache

from django_wurk.conf import app_settings
from django_wurk.core import api
from django_wurk.core.config import ConfigError, UnknownShard
from django_wurk.core.engine import wurk
from django_wurk.dashboard import charts
from django_wurk.dashboard.access import REFUSED, UNAVAILABLE, View, guard, render_page
from django_wurk.dashboard.nav import admin_url_name

HISTORY_DAYS = (7, 30, 90, 180)
#: Seconds between two polls of the live graph.
POLL_INTERVALS = (1, 2, 5, 10, 20, 60)
REDIS_FIELDS = (*api.REDIS_INFO_FIELDS, "store_name", "store_version")


def stats_payload() -> dict[str, Any]:
    """What Sidekiq Web's ``/stats`` returns, with the same names."""
    stats = api.Stats(wurk)
    info = api.redis_info(wurk)
    return {
        "sidekiq": {
            "processed": stats.processed,
            "failed": stats.failed,
            "busy": stats.workers_size,
            "processes": stats.processes_size,
            "enqueued": stats.enqueued,
            "scheduled": stats.scheduled_size,
            "retries": stats.retry_size,
            "dead": stats.dead_size,
            "default_latency": round(stats.default_queue_latency, 3),
            # Not in Sidekiq Web's /stats: jobs skipped because they expired (docs/expiring.md).
            "expired": stats.expired,
        },
        "redis": {name: info.get(name) for name in REDIS_FIELDS},
        "server_utc_time": datetime.now(UTC).strftime("%H:%M:%S UTC"),
    }


def stats_json(request: HttpRequest, site: AdminSite) -> HttpResponse:
    return JsonResponse(stats_payload())


def stats_endpoint(site: AdminSite) -> View:
    """The JSON stats: for a logged-in viewer, or for ``Authorization: Bearer <DASHBOARD_STATS_TOKEN>``."""
    guarded = guard(site, stats_json, as_json=True)

    @never_cache
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("bearer "):
            return guarded(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD"):
            return JsonResponse({"error": "method_not_allowed"}, status=405)
        try:
            token = app_settings().dashboard_stats_token
            if not token or not constant_time_compare(header[7:].strip(), token):
                return JsonResponse({"error": "unauthorized"}, status=401)
            # Monitoring keeps no session: each shard's figures are asked for by name.
            with wurk.via(request.GET.get("shard")):
                return JsonResponse(stats_payload())
        except UnknownShard as exc:
            return JsonResponse({"error": "unknown_shard", "message": str(exc)}, status=404)
        except (*UNAVAILABLE, *REFUSED, ConfigError) as exc:
            return JsonResponse({"error": "redis_unavailable", "message": str(exc)}, status=503)

    return view


def int_choice(value: str | None, choices: tuple[int, ...], default: int) -> int:
    """``value`` as one of ``choices``; anything else (missing, junk) gives ``default``."""
    try:
        number = int(value or "")
    except ValueError:
        return default
    return number if number in choices else default


def dashboard(request: HttpRequest, site: AdminSite) -> HttpResponse:
    days = int_choice(request.GET.get("days"), HISTORY_DAYS, 30)
    interval = int_choice(request.GET.get("interval"), POLL_INTERVALS, 5)
    payload = stats_payload()
    history = api.Stats.history(days, wurk=wurk)
    dates = sorted(history["processed"])  # oldest first
    chart = charts.line_chart(
        [date.fromisoformat(d).strftime("%b %d") for d in dates],
        [
            charts.Series("Processed", [history["processed"][d] for d in dates], "processed"),
            charts.Series("Failed", [history["failed"][d] for d in dates], "failed"),
        ],
        title=f"Jobs processed and failed per day, last {days} days",
    )
    s = payload["sidekiq"]
    cards = [
        ("processed", "Processed", s["processed"], ""),
        ("failed", "Failed", s["failed"], ""),
        ("expired", "Expired", s["expired"], ""),
        ("busy", "Busy", s["busy"], "busy"),
        ("enqueued", "Enqueued", s["enqueued"], "queues"),
        ("scheduled", "Scheduled", s["scheduled"], "scheduled"),
        ("retries", "Retries", s["retries"], "retries"),
        ("dead", "Dead", s["dead"], "dead"),
        ("processes", "Processes", s["processes"], "busy"),
    ]
    app = site.name
    context = {
        "cards": [
            (key, label, value, reverse(admin_url_name(page), current_app=app) if page else "")
            for key, label, value, page in cards
        ],
        "history_chart": chart,
        "history_days": days,
        "history_choices": HISTORY_DAYS,
        "redis": payload["redis"],
        "poll_intervals": POLL_INTERVALS,
        "live_config": {
            "statsUrl": reverse(admin_url_name("stats"), current_app=app),
            "interval": interval,
            "initial": s,
        },
    }
    return render_page(
        request, site, "django_wurk/dashboard/index.html", "Dashboard", context, tab="dashboard"
    )
