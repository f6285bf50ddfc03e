"""Who may see and do what, read-only mode, rendering, and what a page does when Redis is down.

Every dashboard view goes through ``guard``:

* the admin site's ``admin_view`` first: anonymous (and non-staff) users are sent to the
  admin login, CSRF is enforced, and nothing is cached;
* pages answer GET (and HEAD) only and need ``django_wurk.view_dashboard``;
* actions answer POST only, need ``django_wurk.manage_jobs``, and are refused while
  ``WURK["DASHBOARD_READ_ONLY"]`` is on (403 either way, never a silent no-op);
* a Redis that cannot be reached gives a 503 page with a banner saying so (or a JSON body
  for the stats endpoint), never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, TypeAlias

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.template.loader import render_to_string
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError as RedisResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from django_wurk.conf import app_settings, redis_url_source
from django_wurk.core.config import ConfigError, UnknownShard, redact_url
from django_wurk.core.engine import wurk
from django_wurk.dashboard import nav

logger = logging.getLogger("django_wurk.dashboard")

VIEW_PERMISSION = "django_wurk.view_dashboard"
MANAGE_PERMISSION = "django_wurk.manage_jobs"

View: TypeAlias = Callable[..., HttpResponse]
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError)
#: Redis answered but refused: a key of the wrong type (WRONGTYPE, written by something
#: else), a full memory (OOM), a read-only replica, an ACL (NOPERM)...
REFUSED = (RedisResponseError,)


def can_view(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION))


def can_manage(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(MANAGE_PERMISSION))


def read_only() -> bool:
    return app_settings().dashboard_read_only


#: The session key that keeps the shard a user switched to (``?shard=NAME``).
SHARD_SESSION_KEY = "django_wurk_shard"


def chosen_shard(request: HttpRequest) -> str:
    """The shard this request shows and acts on: ``?shard=NAME`` switches to it (and the
    session keeps it for the next pages and their forms), else the session's, else the
    process's own. A name ``WURK["SHARDS"]`` lacks raises ``UnknownShard``."""
    names = wurk.config.shard_names()
    session = getattr(request, "session", None)
    asked = request.GET.get("shard")
    if asked is not None:
        if asked not in names:
            raise UnknownShard(asked, names)
        if session is not None:
            session[SHARD_SESSION_KEY] = asked
        return asked
    kept = session.get(SHARD_SESSION_KEY) if session is not None else None
    return kept if kept in names else wurk.config.shard


def _shard_context() -> dict[str, Any]:
    try:
        names = wurk.config.shard_names()
        return {"wurk_shards": names if len(names) > 1 else (), "wurk_shard": wurk.shard}
    except ConfigError:
        return {"wurk_shards": (), "wurk_shard": ""}


def render_page(
    request: HttpRequest,
    site: AdminSite,
    template: str,
    title: str,
    context: Mapping[str, Any] | None = None,
    *,
    tab: str = "",
    status: int = 200,
    counts: bool = True,
) -> HttpResponse:
    """Render a dashboard template inside the admin (sidebar, header, theme) right away.

    Rendering eagerly (not a lazy ``TemplateResponse``) keeps any Redis call a template
    makes inside ``guard``, so an outage mid-render still becomes the 503 page.
    """
    try:
        readonly = read_only()
    except ConfigError:
        readonly = True
    full = {
        **site.each_context(request),
        "title": title,
        # Someone who may not see the dashboard does not get its tabs (or the set sizes on them).
        "wurk_tabs": nav.tabs(tab, counts=counts, current_app=site.name) if can_view(request.user) else [],
        "read_only": readonly,
        "can_act": can_manage(request.user) and not readonly,
        **_shard_context(),
        **(context or {}),
    }
    text = render_to_string(template, full, request=request)
    response = HttpResponse(status=status)
    try:
        response.content = text.encode(response.charset)
    except UnicodeEncodeError:
        # Job data may hold what no encoding can write (a lone surrogate decoded from
        # "\ud800" in a payload): shown as its escape rather than failing the page.
        response.content = text.encode(response.charset, "backslashreplace")
    return response


def forbidden(request: HttpRequest, site: AdminSite, reason: str, tab: str = "") -> HttpResponse:
    return render_page(
        request,
        site,
        "django_wurk/dashboard/forbidden.html",
        "Permission denied",
        {"reason": reason},
        tab=tab,
        status=403,
    )


def not_found(
    request: HttpRequest,
    site: AdminSite,
    reason: str,
    *,
    tab: str = "",
    back: tuple[str, str] | None = None,
) -> HttpResponse:
    """A 404 that says what was not found (Django's own 404 page says nothing)."""
    back_label, back_url = back or ("", "")
    return render_page(
        request,
        site,
        "django_wurk/dashboard/missing.html",
        "Not found",
        {"reason": reason, "back_label": back_label, "back_url": back_url},
        tab=tab,
        status=404,
    )


def unavailable(
    request: HttpRequest, site: AdminSite, exc: BaseException, as_json: bool, tab: str = ""
) -> HttpResponse:
    """The 503 answer when Redis cannot be reached or refuses a command (or the configuration
    cannot be built): a page that says so, never a traceback."""
    if isinstance(exc, ConfigError):
        headline = "The Wurk configuration is invalid."
        where = source = ""
    elif isinstance(exc, REFUSED):
        headline = "Redis refused a command."
        where = source = ""
    else:
        headline = "Redis is unavailable."
        try:
            where = redact_url(wurk.config.redis_url)
            source = redis_url_source()
        except ConfigError:
            where = source = ""
    problem = str(exc)
    logger.warning("dashboard: %s %s: %s %s", request.method, request.path, headline, problem)
    if as_json:
        return JsonResponse({"error": "redis_unavailable", "message": f"{headline} {problem}"}, status=503)
    return render_page(
        request,
        site,
        "django_wurk/dashboard/unavailable.html",
        "Wurk is unavailable",
        {"headline": headline, "problem": problem, "redis_url": where, "redis_url_source": source},
        tab=tab,
        status=503,
        counts=False,
    )


def guard(site: AdminSite, view: View, *, action: bool = False, as_json: bool = False, tab: str = "") -> View:
    """Wrap a dashboard view: admin login, permission, method, read-only and outage handling.

    The view is called as ``view(request, site, *args, **kwargs)``.
    """

    @wraps(view)
    def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        request.current_app = site.name
        active = tab or str(kwargs.get("kind", ""))  # the set pages share their views
        try:
            # Read first: a broken setting of the app's (DASHBOARD_READ_ONLY, say) gives the
            # 503 page below, as a broken setting of the engine's does, not a page that guesses.
            app_settings()
            if action:
                if request.method != "POST":
                    return HttpResponseNotAllowed(["POST"])
                if not can_manage(request.user):
                    return forbidden(
                        request,
                        site,
                        f"Changing jobs needs the permission “{MANAGE_PERMISSION}”.",
                        active,
                    )
                if read_only():
                    return forbidden(
                        request,
                        site,
                        "The dashboard is read-only (WURK['DASHBOARD_READ_ONLY']): nothing can be changed.",
                        active,
                    )
            else:
                if request.method not in ("GET", "HEAD"):
                    return HttpResponseNotAllowed(["GET", "HEAD"])
                if not can_view(request.user):
                    if as_json:
                        return JsonResponse({"error": "forbidden"}, status=403)
                    return forbidden(
                        request, site, f"The Wurk dashboard needs the permission “{VIEW_PERMISSION}”.", active
                    )
            try:
                shard = chosen_shard(request)
            except UnknownShard as exc:
                return not_found(request, site, str(exc), tab=active)
            # Every page and action of this request reads and writes the chosen shard.
            with wurk.via(shard):
                return view(request, site, *args, **kwargs)
        except (*UNAVAILABLE, *REFUSED, ConfigError) as exc:
            return unavailable(request, site, exc, as_json, active)

    return site.admin_view(inner)


def notify(request: HttpRequest, level: int, text: str) -> None:
    """A message on the next page (silently dropped where the messages app is not set up)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # see ``audit``
    messages.add_message(request, level, text, fail_silently=True)


def audit(request: HttpRequest, what: str) -> None:
    """Record who changed what: in the operations log, and in the admin's own history.

    The admin's LogEntry puts dashboard actions in "Recent actions" beside every other
    change made in the admin, which is where a Django team looks first. The action has
    already happened, so a failure to write that row is logged, never raised.
    """
    # Job data in the text (a jid) may hold what no encoding can write, a lone surrogate:
    # written as its escape, so neither the log nor the database refuses it.
    # A NUL (a binary queue name) is refused by PostgreSQL in any text column: escaped too.
    what = what.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    user = getattr(request.user, "get_username", lambda: "?")()
    logger.info("dashboard: %s %s", user, what)
    if not request.user.is_authenticated:
        return
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType
    from django.db import DatabaseError, router, transaction

    from django_wurk.models import Dashboard

    try:
        # In a savepoint: a refused row must not break the request's transaction
        # (ATOMIC_REQUESTS, or a test's), which PostgreSQL would then refuse every query in.
        with transaction.atomic(using=router.db_for_write(LogEntry)):
            LogEntry.objects.create(
                user_id=request.user.pk,
                content_type=ContentType.objects.get_for_model(Dashboard, for_concrete_model=False),
                object_id=None,
                object_repr=what[:200],
                action_flag=CHANGE,
                change_message=what,
            )
    except (DatabaseError, ValueError) as exc:
        logger.warning("dashboard: could not record %r in the admin log: %s", what, exc)
