"""The dashboard's pages as the navigation knows them: their URL names and the tabs, in order.

Every other dashboard module builds on these names, so this one imports none of them. A
feature that brings a page (batches, periodic jobs, limiters) adds its view under a URL
named ``django_wurk_dashboard_<key>`` and its ``Tab`` here, with an ``available`` that says
when to show it (usually: the feature is in use). No tab is listed before its page exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse
from redis.exceptions import RedisError

from django_wurk.core import keys
from django_wurk.core.engine import wurk
from django_wurk.core.features.batches import keys as batch_keys

#: Prefix of every dashboard URL name inside the admin namespace (``admin:<prefix><name>``).
URL_PREFIX = "django_wurk_dashboard_"


def url_name(name: str) -> str:
    return f"{URL_PREFIX}{name}"


def admin_url_name(name: str) -> str:
    return f"admin:{URL_PREFIX}{name}"


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Tab:
    key: str
    label: str
    #: The URL name, without the ``admin:django_wurk_dashboard_`` prefix.
    url: str
    available: Callable[[], bool] = _always
    #: A Redis sorted set whose size is shown next to the label.
    counted: str = ""


TABS: list[Tab] = [
    Tab("dashboard", "Dashboard", "changelist"),
    Tab("busy", "Busy", "busy"),
    Tab("queues", "Queues", "queues"),
    Tab("scheduled", "Scheduled", "scheduled", counted=keys.SCHEDULE),
    Tab("retries", "Retries", "retries", counted=keys.RETRY),
    Tab("dead", "Dead", "dead", counted=keys.DEAD),
    Tab("metrics", "Metrics", "metrics"),
    Tab("batches", "Batches", "batches", counted=batch_keys.INDEX),
    Tab("limits", "Limits", "limits"),
    # Always shown: the loops are whatever a leader registered in Redis, which this web
    # process's own settings do not tell; the empty tab says how loops get there.
    Tab("periodic", "Periodic", "periodic"),
]


@dataclass(frozen=True)
class Link:
    key: str
    label: str
    href: str
    active: bool
    count: int | None


def tabs(active: str, counts: bool = True, current_app: str | None = None) -> list[Link]:
    """The visible tabs; set sizes in one round trip (left out if Redis fails to give them).

    The sizes only decorate the tabs: no Redis error about them may cost the page.
    """
    shown = [t for t in TABS if t.available()]
    sizes: dict[str, int] = {}
    counted = [t.counted for t in shown if t.counted]
    if counts and counted:
        try:
            pipe = wurk.redis.pipeline(transaction=False)
            for name in counted:
                pipe.zcard(name)
            sizes = dict(zip(counted, (int(n) for n in pipe.execute()), strict=True))
        except RedisError:
            sizes = {}
    links = []
    for t in shown:
        try:
            href = reverse(admin_url_name(t.url), current_app=current_app)
        except NoReverseMatch:  # a page whose feature says "available" before its URL exists
            continue
        links.append(Link(t.key, t.label, href, t.key == active, sizes.get(t.counted)))
    return links
