"""The dashboard's tabs, in order.

Pages for features that have not landed yet (batches, periodic jobs, limiters) are listed
with ``available`` returning False, so they stay hidden; when a feature lands, its view gets
a URL named ``django_wurk_dashboard_<key>`` and its tab an ``available`` that says when to
show it (usually: the feature is in use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from django_wurk.core import keys
from django_wurk.core.engine import wurk
from django_wurk.dashboard.access import REFUSED, UNAVAILABLE, admin_url_name


def _always() -> bool:
    return True


def _not_yet() -> bool:
    return False


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
    Tab("batches", "Batches", "batches", available=_not_yet),
    Tab("periodic", "Periodic jobs", "periodic", available=_not_yet),
    Tab("limiters", "Limiters", "limiters", available=_not_yet),
]


@dataclass(frozen=True)
class Link:
    key: str
    label: str
    href: str
    active: bool
    count: int | None


def tabs(active: str, counts: bool = True, current_app: str | None = None) -> list[Link]:
    """The visible tabs; set sizes in one round trip (left out if Redis does not answer)."""
    shown = [t for t in TABS if t.available()]
    sizes: dict[str, int] = {}
    counted = [t.counted for t in shown if t.counted]
    if counts and counted:
        try:
            pipe = wurk.redis.pipeline(transaction=False)
            for name in counted:
                pipe.zcard(name)
            sizes = dict(zip(counted, (int(n) for n in pipe.execute()), strict=True))
        except (*UNAVAILABLE, *REFUSED):
            sizes = {}
    links = []
    for t in shown:
        try:
            href = reverse(admin_url_name(t.url), current_app=current_app)
        except NoReverseMatch:  # a page whose feature says "available" before its URL exists
            continue
        links.append(Link(t.key, t.label, href, t.key == active, sizes.get(t.counted)))
    return links
