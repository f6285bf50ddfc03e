"""The bad-data corpus against the dashboard and the data API (issue 10's general guard).

The corpus goes into every key kind the dashboard and ``django_wurk.core.api`` read: queues
(odd names too), the schedule, retry and dead sets at odd scores, dead-set entries written by
real workers, process hashes and busy-work hashes, stats and metrics keys holding junk. Then:

* every dashboard page reachable by a link from the front page is fetched (paging, ordering,
  every entry page, every queue page, every metrics page), plus hand-made URLs (odd entry
  keys, odd paging and search parameters); each answers 200, 302 or 404, never 500 or an
  exception, an entry page linked from a listing opens (200), and ``/stats`` is strict JSON;
* every per-entry, bulk and "all" action, queue action and process signal is posted; each
  answers 200 or 302, and moving entries loses nothing and multiplies nothing;
* the data API (Stats, Queue, the three sets, ProcessSet, Workers) reads all of it without an
  exception, reports each queue's real size, and finds each entry by the key it gives it.

No workers run during the walk, so every entry a listing shows is still there when its page is
fetched. Problems are collected and reported together, one line each.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import time
from collections import deque
from typing import Any
from urllib.parse import parse_qs, quote, urldefrag, urljoin, urlsplit

import pytest
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from django_wurk import Wurk, wurk
from django_wurk.core import api, keys, wire
from tests.dashboard.conftest import url
from tests.hostile.conftest import Fleet, settle
from tests.hostile.corpus import (
    ODD_NAMES,
    Draft,
    drafts,
    load_odd_processes_queues_and_stats,
    members,
    odd_scores,
)
from tests.hostile.ledger import one_line, report

pytestmark = pytest.mark.django_db

HREF = re.compile(r'href="([^"]*)"')
KEY_INPUT = re.compile(r'name="key" value="([^"]*)"')
#: Statuses a page may answer with hostile data: shown, redirected (gone) or not found.
FINE = (200, 302, 404)


# Loading ----------------------------------------------------------------------------------------


def engine_made_entries(r: Any, fleet: Fleet) -> None:
    """Dead and retry entries written by real workers (the envelopes of refused payloads,
    retries of failed ones), so the pages show what the engine itself writes."""
    fleet.start(1)
    now = time.time()
    pipe = r.pipeline(transaction=False)
    for member in members("engine", now, flavours=(True,), huge_mb=()):
        if len(member.raw) < 100_000:
            pipe.lpush(keys.queue("default"), member.raw)
    pipe.execute()
    settle(r, fleet, "engine-made entries", timeout=20.0)
    fleet.stop()
    # Whatever the workers could not finish is not what this test is about.
    for key in r.scan_iter(match=keys.PRIVATE_QUEUE_PREFIX + "*"):
        r.delete(key)


def load_everything(r: Any, now: float) -> dict[bytes, str]:
    """The corpus in every key kind the dashboard reads; returns raw bytes -> member name."""
    names: dict[bytes, str] = {}
    scores = itertools.cycle(odd_scores(now))
    sets = itertools.cycle((keys.SCHEDULE, keys.RETRY, keys.DEAD))
    pipe = r.pipeline(transaction=False)
    # Every member in the default queue, and in one of the three sets (each at an odd score):
    # every member gets a queue page row, a set listing row and an entry page of its own.
    for member in members("queue", now, flavours=(True,), huge_mb=(1,)):
        names[member.raw] = member.name
        pipe.lpush(keys.queue("default"), member.raw)
    for member in members("sets", now, flavours=(True,), huge_mb=(1,)):
        if len(member.raw) > 200_000:
            continue  # the huge ones are on the queue's pages; every listing variant would render them
        names[member.raw] = member.name
        pipe.zadd(next(sets), {member.raw: next(scores)})
    pipe.sadd(keys.QUEUES, "default")
    # The history stream: each member as every field of one snapshot (the History page).
    stamp = int(now * 1000) - 600_000
    for n, member in enumerate(members("history", now, flavours=(True,), huge_mb=())):
        fields = ("processed", "failed", "enqueued", "busy", "queues", "leader")
        pipe.xadd("history:metrics", dict.fromkeys(fields, member.raw[:200_000]), id=f"{stamp + n}-0")
    pipe.execute()
    load_odd_processes_queues_and_stats(r, now)
    return names


@pytest.fixture
def corpus_everywhere(r: Any, fleet: Fleet) -> dict[bytes, str]:
    engine_made_entries(r, fleet)
    return load_everything(r, time.time())


# Fetching ---------------------------------------------------------------------------------------


class Walker:
    """GETs and POSTs through the test client, collecting every 500 or exception.

    The same failure of one view (same path, same exception) is one line with a count and the
    first request that hit it, so a page that fails for every parameter does not flood the report.
    """

    def __init__(self, client: Client, label: str) -> None:
        self.client = client
        self.label = label
        self.extra: list[str] = []
        self._failures: dict[tuple[str, str, str], list[str]] = {}

    @property
    def problems(self) -> list[str]:
        lines = []
        for (method, _path, what), requests in self._failures.items():
            more = f" ({len(requests)} requests, e.g. the first)" if len(requests) > 1 else ""
            lines.append(f"{self.label}: {method} {shown(requests[0])}{more} {what}")
        return lines + self.extra

    def _failed(self, method: str, target: str, what: str, shown_as: str | None = None) -> None:
        key = (method, urlsplit(target).path, what)
        self._failures.setdefault(key, []).append(shown_as or target)

    def get(self, path: str, allowed: tuple[int, ...] = FINE) -> Any:
        try:
            response = self.client.get(path)
        except Exception as exc:
            self._failed("GET", path, f"raised {one_line(exc)}")
            return None
        if response.status_code not in allowed:
            self._failed("GET", path, f"answered {response.status_code}")
        return response

    def post(self, path: str, data: dict[str, Any], allowed: tuple[int, ...] = (200, 302)) -> Any:
        try:
            response = self.client.post(path, data)
        except Exception as exc:
            self._failed("POST", path, f"raised {one_line(exc)}", f"{path} {data}")
            return None
        if response.status_code not in allowed:
            self._failed("POST", path, f"answered {response.status_code}", f"{path} {data}")
        return response


def shown(text: str, limit: int = 140) -> str:
    return repr(text[:limit]) + (f"... ({len(text):,} chars)" if len(text) > limit else "")


def body(response: Any) -> str:
    if response is None or response.status_code != 200:
        return ""
    return str(response.content.decode("utf-8", "replace"))


def links(page: str, here: str, base: str) -> list[str]:
    out = []
    for href in HREF.findall(page):
        target, _ = urldefrag(urljoin(here, html.unescape(href)))
        if target.startswith(base):
            out.append(target)
    return out


def worth_following(target: str) -> bool:
    """Every page of the default listing, and the first page of each other ordering and size
    (every combination would be thousands of requests showing the same entries)."""
    return len(parse_qs(urlsplit(target).query)) <= 1


def normal(target: str) -> str:
    """The URL with its query parameters sorted, so one page is fetched once."""
    parts = urlsplit(target)
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    return parts.path + (f"?{query}" if query else "")


def crawl(walker: Walker, start: list[str], base: str, limit: int = 3000) -> dict[str, int]:
    """Follow every dashboard link from ``start``; returns URL -> status."""
    entry_prefix = base  # entry pages live under <base><kind>/<key>/
    seen: dict[str, int] = {}
    todo = deque(start)
    while todo and len(seen) < limit:
        target = todo.popleft()
        if target in seen:
            continue
        response = walker.get(target)
        seen[target] = response.status_code if response is not None else 500
        for found in links(body(response), target, entry_prefix):
            found = normal(found)
            if found not in seen and worth_following(found):
                todo.append(found)
    return seen


def strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


# Pages ------------------------------------------------------------------------------------------


SETS = {"scheduled": keys.SCHEDULE, "retries": keys.RETRY, "dead": keys.DEAD}


def entry_url(kind: str, key: str) -> str:
    return url(kind) + quote(key, safe="") + "/"


def entry_kind(target: str) -> str | None:
    """``dead`` for a dead-set entry page's URL (not the listing), and so on; else None."""
    path = urlsplit(target).path
    return next((k for k in SETS if path.startswith(url(k)) and path != url(k)), None)


def unopened(seen: dict[str, int], label: str) -> list[str]:
    """Entry pages linked from a listing that did not open, one line per set and status."""
    failed: dict[tuple[str, int], list[str]] = {}
    for target, status in seen.items():
        kind = entry_kind(target)
        if kind and status != 200:
            failed.setdefault((kind, status), []).append(target)
    return [
        f"{label}: {len(targets)} {kind} entry page(s) linked from the listing answered {status}, e.g. "
        + ", ".join(shown(urlsplit(t).path.removeprefix(url(kind)), 60) for t in targets[:4])
        for (kind, status), targets in sorted(failed.items())
    ]


def test_every_dashboard_page_and_the_data_api_answer_over_the_corpus(
    admin_client: Client, wurk: Wurk, r: Any, corpus_everywhere: dict[bytes, str]
) -> None:
    """Read-only, so one load serves both: the pages first, then the data API on the same data."""
    walker = Walker(admin_client, "dashboard pages")
    base = url("changelist")
    start = [
        url(p) for p in ("changelist", "busy", "queues", "scheduled", "retries", "dead", "metrics", "history")
    ]
    for name in [*ODD_NAMES, b"default", b"no-such-queue"]:
        start.append(url("queues") + quote(name, safe="") + "/")
    seen = crawl(walker, start, base)

    # An entry linked from a listing exists (no worker runs): its page must open, not redirect.
    walker.extra += unopened(seen, "dashboard pages")
    for kind, name in SETS.items():
        linked = [t for t in seen if entry_kind(t) == kind]
        if not linked and r.zcard(name):
            walker.extra.append(f"dashboard pages: no {kind} entry page could be reached from its listing")

    # Hand-made URLs: odd parameters and entry keys must never give a 500.
    odd_params = ["?page=-1", "?page=abc", "?page=99999999999", "?count=7&order=bogus", "?q=%00", "?q=*",
                  "?q=%5B%5C", "?q=NaN", "?q=" + "x" * 300, "?q=%ED%A0%80", "?page=2&count=100&order=oldest"]  # fmt: skip
    for kind in ("scheduled", "retries", "dead"):
        for params in odd_params:
            walker.get(url(kind) + params)
        for key in ["nan-abc", "-5.0-abc", "inf-", "-inf-x", "1e999-x", "abc", "-", "--", "0-" + "x" * 5000,
                    "1.0-%00", "-0.0-", "1e-9-"]:  # fmt: skip
            walker.get(entry_url(kind, key))
    for params in ["?days=abc", "?days=-1", "?interval=0", "?interval=abc"]:
        walker.get(url("changelist") + params)
    for params in ["?period=bogus", "?q=%00", "?q=" + "x" * 300]:
        walker.get(url("metrics") + params)
    for params in ["?period=bogus", "?period=30d", "?period=%00"]:
        walker.get(url("history") + params)
    for name in ["Evil\nClass", "x|y", "Hostile::Good", "%00", "a" * 2000]:
        walker.get(url("metrics") + quote(name, safe="") + "/")
    for params in ["?page=abc&count=100&order=oldest", "?page=99999"]:
        walker.get(url("queue", name="default") + params)

    # /stats must be strict JSON (no NaN or Infinity), for a browser's JSON.parse.
    stats = walker.get(url("stats"), allowed=(200,))
    if stats is not None and stats.status_code == 200:
        try:
            strict_json(stats.content.decode())
        except ValueError as exc:
            walker.extra.append(f"dashboard pages: /stats is not strict JSON: {one_line(exc)}")

    problems = {"dashboard pages": walker.problems, "data API": api_problems(wurk, r, corpus_everywhere)}
    assert not any(problems.values()), report(problems)


# Actions ----------------------------------------------------------------------------------------

ACTIONS = {"scheduled": ("add_to_queue", "kill", "delete", "cancel"), "retries": ("retry", "kill", "delete", "cancel"),
           "dead": ("retry", "delete")}  # fmt: skip


def entry_keys(walker: Walker, kind: str) -> list[str]:
    """The keys the listing's checkboxes post, page by page (what a browser sends)."""
    out: list[str] = []
    for page in range(1, 200):
        response = walker.get(f"{url(kind)}?order=oldest&count=100&page={page}")
        found = [html.unescape(k) for k in KEY_INPUT.findall(body(response))]
        out += found
        if len(found) < 100:
            return out
    return out


def population(r: Any) -> int:
    """Every job anywhere: the three sets and every list under ``queue:``."""
    total = sum(r.zcard(name) for name in SETS.values())
    for key in r.scan_iter(match="queue:*", count=1000):
        if r.type(key) == b"list":
            total += r.llen(key)
    return int(total)


def raws(r: Any, *names: str) -> set[bytes]:
    """The members of those sets; for the dead set only those young enough to survive the trim
    every burial does (Sidekiq's: older than ``DEAD_TIMEOUT`` goes), which is not a loss."""
    out: set[bytes] = set()
    for name in names:
        if name == keys.DEAD:
            oldest = time.time() - wurk.config.dead_timeout + 60
            out.update(r.zrangebyscore(name, oldest, "+inf"))
        else:
            out.update(r.zrange(name, 0, -1))
    return out


def test_every_dashboard_action_answers_and_loses_nothing(
    admin_client: Client, r: Any, corpus_everywhere: dict[bytes, str]
) -> None:
    walker = Walker(admin_client, "dashboard actions")

    def moved_without_loss(what: str, before: int) -> None:
        after = population(r)
        if after != before:
            walker.extra.append(
                f"dashboard actions: {what} changed the number of jobs in Redis from {before} to {after}"
            )

    for kind, name in SETS.items():
        found = entry_keys(walker, kind)
        if len(found) < r.zcard(name):
            walker.extra.append(
                f"dashboard actions: the {kind} listing offers {len(found)} of its {r.zcard(name)} entries "
                "to select"
            )
        singles, selected = found[: len(found) // 3], found[len(found) // 3 : 2 * len(found) // 3]
        # One entry at a time, each action in turn.
        for key, action in zip(singles, itertools.cycle(ACTIONS[kind]), strict=False):
            before, union = population(r), raws(r, name, keys.DEAD)
            walker.post(url("bulk", kind=kind), {"action": action, "key": [key]})
            if action in ("retry", "add_to_queue"):
                moved_without_loss(f"{action} of the {kind} entry {shown(key)}", before)
            elif action == "kill" and not union <= raws(r, name, keys.DEAD):
                walker.extra.append(f"dashboard actions: kill of the {kind} entry {shown(key)} lost an entry")
        # A selection at once.
        before = population(r)
        walker.post(url("bulk", kind=kind), {"action": ACTIONS[kind][0], "key": selected})
        moved_without_loss(f"{ACTIONS[kind][0]} of {len(selected)} selected {kind} entries", before)
        # Everything: the confirmation page, then each "all" action.
        all_actions = {
            "scheduled": ("add_all",),
            "retries": ("retry_all", "kill_all"),
            "dead": ("retry_all",),
        }
        for action in all_actions[kind]:
            walker.post(url("all", kind=kind), {"action": action}, allowed=(200,))
            before, union = population(r), raws(r, name, keys.DEAD)
            walker.post(url("all", kind=kind), {"action": action, "confirm": "yes"}, allowed=(302,))
            if action == "kill_all":
                if not union <= raws(r, keys.DEAD) or r.zcard(name):
                    walker.extra.append(f"dashboard actions: kill all in {kind} left entries or lost some")
            else:
                moved_without_loss(f"{action} in {kind}", before)
        walker.post(url("all", kind=kind), {"action": "delete_all", "confirm": "yes"}, allowed=(302,))
        if r.zcard(name):
            walker.extra.append(f"dashboard actions: delete all in {kind} left {r.zcard(name)} entries")

    # Queues, under every name the queues set holds: delete one job, pause, unpause, clear.
    for raw_name in sorted(r.smembers(keys.QUEUES)):
        name = raw_name.decode("utf-8", "replace")
        page = body(walker.get(url("queues") + quote(raw_name, safe="") + "/"))
        digest = re.search(r'name="digest" value="([^"]*)"', page)
        position = re.search(r'name="position" value="([^"]*)"', page)
        if digest and position:
            walker.post(url("queue_delete"), {"name": name, "digest": digest[1], "position": position[1]})
        # Cancel by jid, every jid the page offers a Cancel for (the jids as a browser posts them).
        for jid in re.findall(r'name="jid" value="([^"]*)"', page):
            walker.post(url("job_cancel"), {"jid": html.unescape(jid), "from": "queue", "name": name})
        walker.post(url("queue_pause"), {"name": name, "next": url("queues")})
        walker.post(url("queue_unpause"), {"name": name, "next": url("queues")})
        walker.post(url("queue_clear"), {"name": name})
        walker.post(url("queue_clear"), {"name": name, "confirm": "yes"})

    # Quiet and stop every process the processes set names, odd ones included, then all.
    for identity in sorted(r.smembers(keys.PROCESSES)):
        for signal in ("quiet", "stop"):
            walker.post(
                url("busy_signal"), {"signal": signal, "identity": identity.decode("utf-8", "replace")}
            )
    walker.post(url("busy_signal"), {"signal": "quiet", "identity": "*"})

    problems = {"dashboard actions": walker.problems}
    assert not any(problems.values()), report(problems)


# The data API -----------------------------------------------------------------------------------

RECORD_FIELDS = ("raw", "jid", "job_class", "queue", "args", "display_args", "enqueued_at", "created_at",
                 "failed_at", "retried_at", "error_class", "error_message", "backtrace", "tags", "latency")  # fmt: skip
ENTRY_FIELDS = (*RECORD_FIELDS, "at", "key", "score")
PROCESS_FIELDS = ("identity", "info", "busy", "beat", "stopping", "rss", "rtt_us", "concurrency", "hostname",
                  "pid", "tag", "queues", "started_at", "leader")  # fmt: skip
STATS_FIELDS = ("processed", "failed", "scheduled_size", "retry_size", "dead_size", "processes_size",
                "default_queue_latency", "workers_size", "queues", "enqueued")  # fmt: skip


class ApiWalk:
    def __init__(self, names: dict[bytes, str]) -> None:
        self.names = names
        self.problems: list[str] = []

    def who(self, raw: bytes) -> str:
        return self.names.get(raw) or repr(raw[:60])

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.problems.append(f"data API: {what} raised {one_line(exc)}")
            return None

    def fields(self, obj: Any, names: tuple[str, ...], what: str) -> None:
        for field in names:
            self.call(f"{what}.{field}", getattr, obj, field)


def api_problems(wurk: Wurk, r: Any, names: dict[bytes, str]) -> list[str]:
    """Everything the data API offers for reading, over whatever Redis holds; one line per failure."""
    walk = ApiWalk(names)

    stats = walk.call("Stats()", api.Stats, wurk)
    if stats is not None:
        walk.fields(stats, STATS_FIELDS, "Stats")
    for days in (1, 30, 180):
        walk.call(f"Stats.history({days})", api.Stats.history, days, wurk=wurk)
    walk.call("redis_info()", api.redis_info, wurk)
    walk.call("queue_summaries()", api.queue_summaries, wurk)

    queues = walk.call("Queue.all()", api.Queue.all, wurk) or []
    for queue in queues:
        what = f"Queue({queue.name[:40]!r})"
        walk.call(f"{what}.size()", queue.size)
        walk.call(f"{what}.latency()", queue.latency)
        walk.call(f"{what}.paused()", queue.paused)
        records = walk.call(f"list({what})", list, queue) or []
        for record in records:
            walk.fields(record, RECORD_FIELDS, f"{what} job {walk.who(record.raw)}")
        walk.call(f"{what}.find_job('nope')", queue.find_job, "nope")
    # The queues the API lists hold every job the lists named in the queues set hold: a queue
    # whose name does not survive decoding must not hide its jobs.
    held = {raw_name: r.llen(b"queue:" + raw_name) for raw_name in r.smembers(keys.QUEUES)}
    sizes = [walk.call(f"Queue({q.name[:40]!r}).size()", q.size) for q in queues]
    reported = sum(n for n in sizes if isinstance(n, int))
    if queues and reported != sum(held.values()):
        hidden = [
            f"{name[:30]!r} holds {n}"
            for name, n in held.items()
            if n and walk.call("Queue.size()", api.Queue(name.decode("utf-8", "replace"), wurk).size) != n
        ]
        walk.problems.append(
            f"data API: the queues set names lists holding {sum(held.values())} job(s), but the queues "
            f"Queue.all() returns report {reported}: jobs are hidden ({', '.join(hidden)})"
        )

    for cls in (api.ScheduledSet, api.RetrySet, api.DeadSet):
        sset = cls(wurk)
        what = cls.__name__
        walk.call(f"{what}.size()", sset.size)
        walk.call(f"{what}.page()", sset.page, 0, 25)
        walk.call(f"{what}.page(newest_first)", sset.page, 0, 25, True)
        walk.call(f"list({what}.iterate(newest_first))", lambda s=sset: list(s.iterate(True)))
        for pattern in ("Hostile", "*", "\x00", "[", "\\", "\ufffd"):
            walk.call(f"list({what}.scan({pattern!r}))", lambda s=sset, p=pattern: list(s.scan(p)))
        for score in odd_scores(time.time()):
            walk.call(f"{what}.fetch({score!r})", sset.fetch, score)
        entries = walk.call(f"list({what})", list, sset) or []
        for entry in entries:
            who = f"{what} entry {walk.who(entry.raw)}"
            walk.fields(entry, ENTRY_FIELDS, who)
            key = walk.call(f"{who}.key", getattr, entry, "key")
            if key is None:
                continue
            before = len(walk.problems)
            found = walk.call(f"{what}.find({shown(key)}) for {walk.who(entry.raw)}", sset.find, key)
            if found is not None and found.raw != entry.raw and entry.jid:
                walk.problems.append(f"data API: {what}.find({shown(key)}) finds another entry than {who}")
            elif found is None and len(walk.problems) == before:
                walk.problems.append(
                    f"data API: {what}.find({shown(key)}) does not find {who}, which is there"
                )

    processes = walk.call("list(ProcessSet())", list, api.ProcessSet(wurk)) or []
    for process in processes:
        walk.fields(process, PROCESS_FIELDS, f"Process {process.identity[:40]!r}")
    walk.call("ProcessSet().size()", api.ProcessSet(wurk).size)
    walk.call("ProcessSet().total_concurrency()", api.ProcessSet(wurk).total_concurrency)
    running = walk.call("list(Workers())", list, api.Workers(wurk)) or []
    for job in running:
        walk.fields(job.record, RECORD_FIELDS, f"Workers job of {job.identity[:40]!r}")
    walk.call("Workers().size()", api.Workers(wurk).size)
    return list(dict.fromkeys(walk.problems))


# Generated variations ---------------------------------------------------------------------------

KINDS = ("scheduled", "retries", "dead")


def generated_entries(count: int) -> list[tuple[Draft, str, float]]:
    """``count`` Hypothesis examples of (member, set, score), the same on every run."""
    out: list[tuple[Draft, str, float]] = []

    @settings(
        max_examples=count,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(st.tuples(drafts(), st.sampled_from(KINDS), st.floats(allow_nan=False)))
    def collect(example: tuple[Draft, str, float]) -> None:
        out.append(example)

    collect()
    return out


def test_generated_entries_render_and_open(admin_client: Client, wurk: Wurk, r: Any) -> None:
    """Random bytes, random JSON, mangled and mutated Sidekiq payloads at random scores: every
    listing renders, every entry it links opens, and the API reads each one."""
    names: dict[bytes, str] = {}
    pipe = r.pipeline(transaction=False)
    for i, (draft, kind, score) in enumerate(generated_entries(80)):
        member = draft.build(f"g{i}")
        names[member.raw] = f"#{i} {draft!r}"[:200]
        pipe.zadd(SETS[kind], {member.raw: score})
        pipe.lpush(keys.queue("default"), member.raw)
    pipe.sadd(keys.QUEUES, "default")
    pipe.execute()

    walker = Walker(admin_client, "generated pages")
    seen = crawl(
        walker,
        [url(kind) + "?count=100" for kind in KINDS] + [url("queue", name="default")],
        url("changelist"),
    )
    walker.extra += unopened(seen, "generated pages")
    walk = ApiWalk(names)
    for cls in (api.ScheduledSet, api.RetrySet, api.DeadSet):
        for entry in walk.call(f"list({cls.__name__})", list, cls(wurk)) or []:
            walk.fields(entry, ENTRY_FIELDS, f"{cls.__name__} entry {walk.who(entry.raw)}")
    for record in walk.call("list(Queue('default'))", list, api.Queue("default", wurk)) or []:
        walk.fields(record, RECORD_FIELDS, f"Queue('default') job {walk.who(record.raw)}")
    problems = {
        "generated pages": walker.problems,
        "generated (data API)": list(dict.fromkeys(walk.problems)),
    }
    assert not any(problems.values()), report(problems)


def test_entry_keys_survive_a_round_trip_through_the_api(wurk: Wurk, r: Any) -> None:
    """A key the API gives an entry (``<score>-<jid>``) finds that entry, at every odd score."""
    problems = []
    for score in odd_scores(time.time()):
        r.delete(keys.RETRY)
        raw = wire.dumps({"class": "X", "args": [], "jid": "abc", "corpus": repr(score)})
        r.zadd(keys.RETRY, {raw: score})
        [entry] = api.RetrySet(wurk).page()[1]
        try:
            found = api.RetrySet(wurk).find(entry.key)
        except Exception as exc:
            problems.append(f"data API: RetrySet.find({entry.key!r}) raised {one_line(exc)}")
            continue
        if found is None or found.raw != entry.raw:
            problems.append(
                f"data API: RetrySet.find({entry.key!r}) does not find the entry at score {score!r}"
            )
    assert not problems, report({"data API entry keys": problems})
