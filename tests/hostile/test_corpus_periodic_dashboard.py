"""The bad-data corpus against the dashboard's Periodic tab: junk in ``periodic``, ``loops:*``,
``loop-history:*`` and ``dear-leader``, as any client (or a hand-typed command) may write it.

Every corpus member goes into a loop's hash (as its options, its job or its schedule and time
zone) and into its history; junk members of ``periodic``, loop and history keys of other
types, and junk leaders come on top. Then every page reachable from the Periodic tab is
fetched (each loop's page, each history jid's link), and pause, unpause and enqueue now are
posted for every loop the pages offer them for, and for ids no loop has. Each answers 200,
302 or 404, never a 500 or an exception; nothing shows a ``<script>`` unescaped; and enqueue
now pushes only registered jobs, one per success it reports.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import NoReverseMatch

from django_wurk import Wurk
from django_wurk.core import wire
from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.loops import LoopSpec, register
from tests.dashboard.conftest import url
from tests.hostile.corpus import GoodJob, members
from tests.hostile.ledger import report
from tests.hostile.test_corpus_dashboard import Walker, body, links, normal
from tests.hostile.test_corpus_periodic import JUNK_FIELDS, JUNK_HISTORY, JUNK_NF

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"
DASHBOARD = "/admin/django_wurk/dashboard/"
LID_INPUT = re.compile(r'name="lid" value="([^"]*)"')
#: The success message of enqueue now, in the page's (escaped) HTML; a job name may hold anything but "<".
ENQUEUED = re.compile(r"Enqueued loop [^<]*? now: job ([^<\s]+) is on queue")

#: Members of ``periodic`` that are no loop id anyone computes, each given a hash.
ODD_LIDS: list[bytes] = [b"../../x", b"a/b", b"", b"x" * 10_000, b"line\nbreak", XSS.encode(), b"%00", b"\x00",
                         b" ", b"\xff\xfe", b"caf\xc3\xa9"]  # fmt: skip
#: Jids a history entry may carry: junk for a URL, a page or an encoder.
ODD_JIDS: list[Any] = ["", "a/b", XSS, "x" * 5000, "\ud800", "\n", "%2F", "..", 5, None, ["j"], {"jid": "j"}]
#: Values ``dear-leader`` may hold (each set with a ttl, so it stands, or without).
ODD_LEADERS: list[Any] = [b"\xff" * 100_000, XSS, "", b"\x00", "no-ttl:1:x", ("list",), ("hash",)]


class EveryMinute:
    expression = "* * * * *"

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        return moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)


def good_loop(r: Any, n: int, now: float, queue: str = "hostile-periodic") -> str:
    spec = LoopSpec(EveryMinute(), GoodJob, args=(n,), queue=queue)
    register(r, spec, now)
    return spec.lid


def load(r: Any, now: float) -> None:
    """The corpus in every periodic key the tab reads."""
    n = 0
    for field, values in JUNK_FIELDS.items():
        for value in [*values, XSS.encode()]:
            r.hset(keys.loop(good_loop(r, n, now)), field, value)
            n += 1
    for nf in JUNK_NF:
        r.hset(keys.loop(good_loop(r, n, now)), mapping={"nf": nf, "lf": nf})
        n += 1
    # Every member of the corpus as a loop's options and (another's) schedule and time zone,
    # or as its job (alone: a job no one registered stops enqueue now before it reads the
    # options); each member in a history too.
    corpus = members("periodic-dashboard", now, flavours=(True,), huge_mb=(1,))
    for i in range(0, len(corpus), 3):
        group = corpus[i : i + 3]
        fields = [{"options": group[0].raw}]
        if len(group) > 1:
            fields[0].update(schedule=group[1].raw, tz=group[1].raw[:500])
        if len(group) > 2:
            fields.append({"klass": group[2].raw})
        for mapping in fields:
            lid = good_loop(r, n, now)
            n += 1
            r.hset(keys.loop(lid), mapping=mapping)
        for j, member in enumerate(group):
            r.lpush(keys.history(lid), member.raw, wire.dumps([now - i - j, f"jid-{i + j}"]))
    # Histories of junk entries and odd jids.
    lid = good_loop(r, n, now)
    n += 1
    r.rpush(keys.history(lid), *JUNK_HISTORY)
    for jid in ODD_JIDS:
        lid = good_loop(r, n, now, queue="odd-jids")
        n += 1
        r.lpush(
            keys.history(lid),
            json.dumps([now, jid]),
            json.dumps([now, jid], ensure_ascii=False).encode("utf-8", "surrogatepass"),
        )
    # Options naming odd queues: the tab links each queue.
    for queue in ["\ud800", "a/b", "", "\n", "x" * 5000, XSS, 5, None, ["q"]]:
        lid = good_loop(r, n, now)
        n += 1
        r.hset(keys.loop(lid), "options", json.dumps({"args": [n], "tz": "UTC", "queue": queue}))
    # Odd members of ``periodic``, each with a hash (and a history).
    for odd in ODD_LIDS:
        r.sadd(keys.PERIODIC, odd)
        r.hset(keys.loop(odd), mapping={"schedule": "* * * * *", "klass": GoodJob.wire_name, "options": '{"args":[]}', "paused": "0", "nf": str(now + 60)})  # fmt: skip
        r.lpush(keys.history(odd), wire.dumps([now, "odd-lid-jid"]))
    # Keys of other types under registered ids.
    for kind in ("string", "list", "set", "zset"):
        lid = good_loop(r, n, now)
        n += 1
        r.delete(keys.loop(lid))
        writers = {"string": r.set, "list": r.rpush, "set": r.sadd, "zset": lambda k, v: r.zadd(k, {v: 1})}
        writers[kind](keys.loop(lid), "x")
        other = good_loop(r, n, now)
        n += 1
        r.delete(keys.history(other))
        (r.set if kind != "string" else r.sadd)(keys.history(other), "x")
    r.set(keys.LEADER, b"\xff\xfe" + XSS.encode(), ex=60)


def set_leader(r: Any, value: Any) -> None:
    r.delete(keys.LEADER)
    if value == ("list",):
        r.rpush(keys.LEADER, "a", "b")
    elif value == ("hash",):
        r.hset(keys.LEADER, "x", "y")
    elif isinstance(value, str) and value.startswith("no-ttl"):
        r.set(keys.LEADER, value)
    else:
        r.set(keys.LEADER, value, ex=60)


def walk(walker: Walker, start: list[str], base: str) -> dict[str, str]:
    """Fetch ``start`` and every dashboard page linked from a page under ``base`` (followed
    further only under ``base``); returns URL -> body ("" unless it answered 200)."""
    bodies: dict[str, str] = {}
    todo = deque(start)
    while todo:
        target = todo.popleft()
        if target in bodies:
            continue
        bodies[target] = page = body(walker.get(target))
        if target.startswith(base):
            todo.extend(
                normal(found) for found in links(page, target, DASHBOARD) if normal(found) not in bodies
            )
    return bodies


def back_to(lid: str) -> str:
    """The loop's page as its form's ``next`` (cheaper to render than the whole tab)."""
    try:
        return url("loop", lid=lid)
    except NoReverseMatch:
        return url("periodic")


def test_the_periodic_tab_answers_and_escapes_over_the_corpus(
    admin_client: Client, wurk: Wurk, r: Any, use_app_settings: Any
) -> None:
    use_app_settings(enqueue="immediate")  # the test's transaction is never committed
    load(r, time.time())
    walker = Walker(admin_client, "periodic pages")
    base = url("periodic")
    start = [base, base + "nope/", base + "x" * 3000 + "/", base + "%00/", base + "nope/jobs/%00/"]
    bodies = walk(walker, start, base)
    loop_pages = [t for t, page in bodies.items() if t.startswith(base) and t != base and page]
    if len(loop_pages) < 130:
        walker.extra.append(f"periodic pages: only {len(loop_pages)} loop pages opened from the tab")
    walker.extra += [
        f"periodic pages: {t[:80]!r} shows a <script> unescaped" for t, page in bodies.items() if XSS in page
    ]
    for leader in ODD_LEADERS:
        set_leader(r, leader)
        for target in (base, url("busy"), loop_pages[0]):
            if XSS in body(walker.get(target, allowed=(200,))):
                walker.extra.append(f"periodic pages: {target} shows the leader {leader!r:.40} unescaped")

    # Every action on every loop the tab offers it for, and on ids no loop has.
    lids = sorted({html.unescape(v) for v in LID_INPUT.findall(bodies[base])})
    if len(lids) < 130:
        walker.extra.append(f"periodic actions: only {len(lids)} loops had action forms")
    reported: list[str] = []
    for lid in [*lids, "", "nope", "x" * 5000, "\x00"]:
        for action in ("loop_pause", "loop_unpause", "loop_enqueue"):
            response = walker.post(url(action), {"lid": lid, "next": back_to(lid)})
            if action == "loop_enqueue" and response is not None and response.status_code == 302:
                # The page it goes back to shows the messages (those of pause and unpause too).
                reported += ENQUEUED.findall(body(walker.get(response["Location"])))

    pushed = []
    for key in r.scan_iter(match="queue:*"):
        if r.type(key) == b"list":
            pushed += [json.loads(x) for x in r.lrange(key, 0, -1)]
    foreign = sorted({p.get("class") for p in pushed if wurk.registry.resolve(p.get("class", "")) is None})
    if foreign:
        walker.extra.append(f"periodic actions: enqueue now pushed unregistered classes {foreign[:5]}")
    if sorted(p["jid"] for p in pushed) != sorted(reported):
        walker.extra.append(f"periodic actions: {len(pushed)} jobs pushed, {len(reported)} reported enqueued")
    if not reported:
        walker.extra.append("periodic actions: no loop could be enqueued at all")
    assert not walker.problems, report({"periodic pages": walker.problems})
