"""Scheduled, Retries and Dead: the three sorted sets, one set of views.

Entries are addressed as Sidekiq's Web UI addresses them, ``<score>-<jid>``. Every action
says what it did and how many entries had already gone (run, retried or deleted by
someone else in the meantime) instead of failing on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from django_wurk.core import activejob, api
from django_wurk.core.arguments import KWARGS_KEY
from django_wurk.core.engine import wurk
from django_wurk.core.features.cancel import CancelError, cancel
from django_wurk.dashboard.access import audit, notify, render_page
from django_wurk.dashboard.nav import admin_url_name
from django_wurk.dashboard.paging import PAGE_SIZES, pager

#: A search collects at most this many matches (ZSCAN, so the set is never loaded whole).
SEARCH_CAP = 1000
#: The most entries one bulk action takes.
BULK_CAP = 1000
#: Payload fields holding timestamps, shown as times on the detail page.
TIME_FIELDS = ("created_at", "enqueued_at", "failed_at", "retried_at", "at", "discarded_at")

VERBS = {
    "retry": ("Retry now", "retried"),
    "add_to_queue": ("Add to queue", "added to its queue"),
    "delete": ("Delete", "deleted"),
    "kill": ("Kill", "killed (moved to the dead set)"),
    "cancel": ("Cancel", "cancelled (removed; they never run)"),
}
#: The confirmation question of each "all" action: (count, where) -> question.
QUESTIONS = {
    "add_all": "Add all {n} to their queues now?",
    "retry_all": "Retry all {n} now?",
    "kill_all": "Kill all {n} (move them to the dead set)?",
    "delete_all": "Delete all {n}?",
}
ALL_VERBS = {
    "add_all": ("Add all to queue", "added to their queues"),
    "retry_all": ("Retry all", "retried"),
    "kill_all": ("Kill all", "killed (moved to the dead set)"),
    "delete_all": ("Delete all", "deleted"),
}


@dataclass(frozen=True)
class Kind:
    slug: str
    title: str
    set_class: type[api.SortedSet]
    #: The default order: the dead set shows the latest deaths first, the others what is due next.
    newest_first: bool
    when_label: str
    #: Where this set's entries are called, in sentences.
    where: str
    actions: tuple[str, ...]
    all_actions: tuple[str, ...]

    @property
    def requeue(self) -> str:
        return self.actions[0]


KINDS = {
    "scheduled": Kind(
        "scheduled",
        "Scheduled",
        api.ScheduledSet,
        False,
        "When",
        "the scheduled set",
        ("add_to_queue", "delete", "kill", "cancel"),
        ("add_all", "delete_all"),
    ),
    "retries": Kind(
        "retries",
        "Retries",
        api.RetrySet,
        False,
        "Next retry",
        "the retry set",
        ("retry", "delete", "kill", "cancel"),
        ("retry_all", "kill_all", "delete_all"),
    ),
    "dead": Kind(
        "dead",
        "Dead",
        api.DeadSet,
        True,
        "Died",
        "the dead set",
        ("retry", "delete"),
        ("retry_all", "delete_all"),
    ),
}


def kind_of(slug: str) -> Kind:
    try:
        return KINDS[slug]
    except KeyError:
        raise Http404(f"no such set: {slug}") from None


def find(sset: api.SortedSet, key: str) -> api.SortedEntry | None:
    """The entry ``<score>-<jid>`` names, or ``None`` (gone, or not a key at all).

    An entry without a jid (its payload cannot be decoded, or has none) is named by a digest
    of its bytes instead (``api.SortedEntry.key``), so an action on one of several such
    entries at one score acts on the one that was shown.
    """
    try:
        return sset.find(key)
    except ValueError:
        return None


def list_url(site: AdminSite, kind: Kind, query: str = "") -> str:
    url = reverse(admin_url_name(kind.slug), current_app=site.name)
    return url + query if query.startswith("?") else url


def listing(request: HttpRequest, site: AdminSite, kind: str) -> HttpResponse:
    k = kind_of(kind)
    sset = k.set_class(wurk)
    paging = pager(request)
    order = request.GET.get("order", "")
    newest_first = order == "newest" if order in ("newest", "oldest") else k.newest_first
    query = request.GET.get("q", "").strip()[:200]
    truncated = False
    if query:
        matches: list[api.SortedEntry] = []
        for entry in sset.scan(query):
            if len(matches) >= SEARCH_CAP:
                truncated = True
                break
            matches.append(entry)
        matches.sort(key=lambda e: e.score, reverse=newest_first)
        paging.total = len(matches)
        entries = matches[paging.start : paging.start + paging.count]
    else:
        paging.total, entries = sset.page(paging.start, paging.count, newest_first)
    context = {
        "kind": k,
        "entries": entries,
        "pager": paging,
        "page_sizes": PAGE_SIZES,
        "newest_first": newest_first,
        "query": query,
        "truncated": truncated,
        "search_cap": SEARCH_CAP,
        "actions": [(a, VERBS[a][0]) for a in k.actions],
        "all_actions": [(a, ALL_VERBS[a][0]) for a in k.all_actions],
    }
    return render_page(request, site, "django_wurk/dashboard/set.html", k.title, context, tab=k.slug)


def _shown_payload(entry: api.SortedEntry) -> dict[str, Any] | None:
    """The payload for display: encrypted arguments masked as the list shows them."""
    if entry.payload is None:
        return None
    shown = dict(entry.payload)
    if entry.get("encrypt") and entry.args:
        shown["args"] = entry.display_args
    return shown


def detail(request: HttpRequest, site: AdminSite, kind: str, key: str) -> HttpResponse:
    k = kind_of(kind)
    entry = find(k.set_class(wurk), key)
    if entry is None:
        notify(request, messages.WARNING, f"That job is no longer in {k.where}.")
        return HttpResponseRedirect(list_url(site, k))
    shown = _shown_payload(entry)
    # Keyword arguments (the payload's ``kwargs``) are shown beside the positional ones.
    keywords = shown.get(KWARGS_KEY) if shown is not None else None
    keywords = keywords if isinstance(keywords, dict) and keywords else None
    fields = []
    if shown is not None:
        for name in sorted(shown):
            if name in ("args", "error_backtrace", "error_message", "error_class", "jid", "queue") or (
                name == "class" and shown[name] == entry.job_class
            ):
                continue
            if name == KWARGS_KEY and keywords is not None:
                continue
            fields.append({"name": name, "value": shown[name], "time": name in TIME_FIELDS})
    aj = activejob.job_data(entry.payload) if entry.payload is not None else None
    context = {
        "kind": k,
        "entry": entry,
        "fields": fields,
        "keywords": keywords,
        "shown": shown,
        "raw_text": entry.raw.decode("utf-8", "replace") if shown is None else "",
        "activejob": {n: v for n, v in aj.items() if n != "arguments"} if aj is not None else None,
        "encrypted": bool(entry.get("encrypt")),
        "tracked": entry.get("track") is True and bool(entry.jid),
        "actions": [(a, VERBS[a][0]) for a in k.actions],
        "list_url": list_url(site, k),
        "crumbs": [(k.title, list_url(site, k))],
    }
    title = f"{entry.job_class} ({entry.jid})" if entry.jid else entry.job_class
    return render_page(request, site, "django_wurk/dashboard/entry.html", title, context, tab=k.slug)


def _apply(entry: api.SortedEntry, action: str) -> bool:
    if action == "retry":
        return entry.retry()
    if action == "add_to_queue":
        return entry.add_to_queue()
    if action == "kill":
        return entry.kill()
    if action == "cancel":
        # By jid (``django_wurk.cancel``): removed wherever it is by now, recorded as cancelled,
        # and flagged so a copy never starts. An entry without a jid cannot be cancelled.
        try:
            return bool(entry.jid) and cancel(entry.jid, wurk)
        except (ValueError, CancelError):  # a jid no cancel takes, an it-<jid> of another type
            return False
    return entry.delete()


def _report(request: HttpRequest, k: Kind, action: str, done: int, gone: int, failed: int) -> None:
    verb = VERBS[action][1]
    if done:
        notify(request, messages.SUCCESS, f"{done:,} job{'s' if done != 1 else ''} {verb}.")
    if gone:
        notify(
            request,
            messages.WARNING,
            f"{gone:,} job{'s were' if gone != 1 else ' was'} no longer in {k.where} "
            "(run, retried or deleted in the meantime).",
        )
    if failed:
        notify(
            request,
            messages.ERROR,
            f"{failed:,} job{'s' if failed != 1 else ''} could not be {verb}: the payload cannot be read "
            "(delete it instead).",
        )


def _act(request: HttpRequest, k: Kind, sset: api.SortedSet, keys: list[str], action: str) -> None:
    done = gone = failed = 0
    for key in keys:
        entry = find(sset, key)
        if entry is None:
            gone += 1
            continue
        if _apply(entry, action):
            done += 1
            audit(request, f"{action} {k.slug} {key}")
        elif find(sset, key) is None:
            gone += 1  # it went between our read and the action
        else:
            failed += 1
    _report(request, k, action, done, gone, failed)


def bulk(request: HttpRequest, site: AdminSite, kind: str) -> HttpResponse:
    k = kind_of(kind)
    back = list_url(site, k, request.POST.get("next", ""))
    action = request.POST.get("action", "")
    keys = list(dict.fromkeys(request.POST.getlist("key")))
    if action not in k.actions:
        notify(request, messages.ERROR, f"Unknown action {action!r} for {k.where}.")
    elif not keys:
        notify(request, messages.WARNING, "Select one or more jobs first.")
    elif len(keys) > BULK_CAP:
        notify(request, messages.ERROR, f"Select at most {BULK_CAP:,} jobs at a time.")
    else:
        _act(request, k, k.set_class(wurk), keys, action)
    return HttpResponseRedirect(back)


def all_action(request: HttpRequest, site: AdminSite, kind: str) -> HttpResponse:
    """Retry/kill/add/delete every entry: POST shows a confirmation, ``confirm=yes`` does it."""
    k = kind_of(kind)
    action = request.POST.get("action", "")
    if action not in k.all_actions:
        notify(request, messages.ERROR, f"Unknown action {action!r} for {k.where}.")
        return HttpResponseRedirect(list_url(site, k))
    sset = k.set_class(wurk)
    label = ALL_VERBS[action][0]
    if request.POST.get("confirm") != "yes":
        size = sset.size()
        context = {
            "question": QUESTIONS[action].format(n=f"{size:,} job{'s' if size != 1 else ''} in {k.where}"),
            "detail": (
                "They are removed from Redis for good. This cannot be undone."
                if action == "delete_all"
                else "It takes the entries in the set when you confirm, each once; entries added "
                "after that are left for later, and ones removed meanwhile are skipped."
            ),
            "action_url": request.path,
            "fields": [("action", action)],
            "button": f"Yes, {label.lower()}",
            "cancel_url": list_url(site, k),
            "crumbs": [(k.title, list_url(site, k))],
        }
        return render_page(
            request,
            site,
            "django_wurk/dashboard/confirm.html",
            f"{k.title}: {label.lower()}",
            context,
            tab=k.slug,
        )
    if action == "delete_all":
        done = sset.clear_all()
    elif action == "add_all":
        done = api.ScheduledSet(wurk).add_all_to_queue()
    elif action == "retry_all":
        done = sset.retry_all()
    else:
        done = sset.kill_all()
    audit(request, f"{action} on {k.slug}: {done} entries")
    notify(request, messages.SUCCESS, f"{done:,} job{'s' if done != 1 else ''} {ALL_VERBS[action][1]}.")
    left = sset.size()
    if left and action != "delete_all":
        notify(
            request,
            messages.WARNING,
            f"{left:,} left in {k.where} (unreadable payloads, or added meanwhile).",
        )
    return HttpResponseRedirect(list_url(site, k))
