"""The bad-data corpus against batches (issue 10's general guard, for the batches feature).

Batches brought new loops over Redis data: the batch pages of the dashboard (list, search, dead
batches, one batch's page and its status JSON, cancelling), ``BatchSet``/``DeadBatchSet``/
``BatchStatus`` reading ``b-<bid>`` hashes and sets, the middleware and handlers that count a
batch job's success, failure and death (``core/lua/batch.lua``), and the callback job that runs
the callbacks a batch keeps in Redis. Here each of them meets hostile batch data:

* ``b-<bid>`` hashes with junk in every field (counters "abc", NaN, 400 digits, negative; times
  "nan", "-Infinity"; odd callback queues and parents; 1 MB descriptions), sub-keys of the wrong
  type, callback entries that are not JSON, not lists, too deep, huge, or name classes that are
  not callbacks, Sidekiq Pro's own batches (a hash shaped its way), keys named by a bid that
  is not UTF-8, and the ``batches``/``dead-batches`` indexes holding members that are no bid
  at odd scores;
* jobs whose payload ``bid`` is hostile (not a string, empty, a bid whose batch is missing,
  corrupt or of the wrong type), run by real workers: each runs exactly once (or leaves one
  trace when it fails), the workers stay alive, nothing stays in a private list, no batch
  bookkeeping failure reaches the processor, and the callback jobs a batch fires from junk
  entries end in the dead set with a reason;
* every batch page and action answers 200, 302 or 404 (never 500), the status JSON is strict,
  and the reading API never raises.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from django_wurk import Wurk
from django_wurk.core import keys
from django_wurk.core.features.batches import BatchSet, BatchStatus, DeadBatchSet
from django_wurk.core.features.batches import keys as bkeys
from django_wurk.core.features.batches.script import CALLBACK_JOB
from tests.dashboard.conftest import url
from tests.hostile.conftest import Fleet
from tests.hostile.corpus import Member, Raw, encode, jid_for, nested, payload
from tests.hostile.ledger import LoopWatch, lenient, one_line, readable_reason, report
from tests.hostile.test_corpus import finish, push_interleaved
from tests.hostile.test_corpus_dashboard import Walker, body, crawl, shown, strict_json

INF = float("inf")

#: Junk for each field of a batch's hash; batch ``i`` takes the ``i``-th value of each (cycling),
#: so every value is read by some batch.
JUNK_FIELDS: dict[str, list[Any]] = {
    "total": ["abc", "NaN", "9" * 400, "-5", "1e400", "", "-inf", "3.5", "9" * 5000, "7"],
    "pending": ["-3", "abc", "nan", "9" * 400, "", "1e400", "2", "-9" * 200, "Infinity", "0"],
    "created_at": ["nan", "-Infinity", "1e400", "abc", "", "-1e300", "9" * 400, "inf"],
    "complete_at": ["nan", "abc", "-Infinity"],
    "success_at": ["inf", "", "x"],
    "death_at": ["-inf", "NaN", "1e999"],
    "complete_upto": ["abc", "-5", "9" * 400],
    "success_upto": ["nan", "", "1e3"],
    "death_upto": ["-1", "x"],
    "linger": ["abc", "1e400", "-1", "9" * 400, "nan", "0.5"],
    "callback_queue": ["a\nb", 'q"x', "", "q" * 10_000, "a/b", "\\", "default"],
    "parent_bid": ["../x", "a/b", "", "x" * 10_000, "hostile-00", 'p"q', "a\nb"],
    "description": ["<script>alert(1)</script>", "d" * 1_000_000, "\x00\x01", "caf\xe9"],
    "invalidated": ["maybe", "1", ""],
    "wurk": ["1", "1", "0"],
}

#: Callback entries of ``b-<bid>-callbacks`` (raw bytes; the list is the engine's own format).
JUNK_CALLBACKS: list[bytes] = [
    b"not json",
    b'{"event":"complete"}',
    b"5",
    b'["complete"]',
    b'["complete","No.Such.Callback",{}]',
    b'["complete","tests.hostile.corpus.HostileJob",{}]',
    b'["complete","django_wurk.core.features.batches.callbacks.BatchCallback#__init__",{}]',
    b'["complete","os.system",{"cmd":"true"}]',
    b'["complete","a.B#_private",{}]',
    b'["complete","a\\\\",{}]',
    b'["complete","q\\"uote",{}]',
    b'["complete","a.B",' + nested(100_000).encode() + b"]",
    b'["complete","a.B",' + nested(50).encode() + b"]",
    b'["complete","a.B",{"big":"' + b"o" * 1_000_000 + b'"}]',
    b'["complete","a.B",NaN]',
    b'["complete","a.B",{}',
    b'["complete","a.B",{}] trailing',
    b'["complete",5,{}]',
    b'["success","No.Such.Callback",[1,2]]',
    b'["death","No.Such.Callback",null]',
    b'["complete","\xff\xfe",{}]',
    b"",
]

#: Members of the ``batches``/``dead-batches`` indexes that are no bid (at odd scores).
JUNK_INDEX: list[tuple[bytes, float]] = [
    (b"", INF),
    (b"\xff\xfe", -INF),
    (b"x" * 100_000, -5.0),
    (b"queue:default", 0.0),
    (b"retry", 1e300),
    (b"hostile-00-jids", -1e300),
    (b"a/b", 5.5),
    (b"a\nb", 2.0**53 + 1),
    (b"../..", 1.0),
    (b"<b>x</b>", 3.0),
    (b"no-such-batch", 4.0),
]

#: Wrong types for ``b-<bid>`` and each sub-key: what a key holds instead.
WRONG_TYPES = ("string", "list", "hash", "zset", "set")


def put(r: Any, key: str | bytes, kind: str) -> None:
    """A key of ``kind`` holding one odd member."""
    if kind == "string":
        r.set(key, b"\xff not a batch key")
    elif kind == "list":
        r.rpush(key, b"x", b"\xff")
    elif kind == "hash":
        r.hset(key, mapping={"wurk": "1", "x": "y"})
    elif kind == "zset":
        r.zadd(key, {b"x": 1.0})
    else:
        r.sadd(key, b"x", b"\xff")


def load_junk_batches(r: Any, now: float) -> list[str]:
    """Hostile batches everywhere a reader looks; returns the bids worth opening one by one."""
    bids: list[str] = []
    pipe = r.pipeline(transaction=False)
    count = max(len(v) for v in JUNK_FIELDS.values())
    for i in range(count):
        bid = f"hostile-{i:02d}"
        bids.append(bid)
        fields = {name: values[i % len(values)] for name, values in JUNK_FIELDS.items()}
        pipe.hset(bkeys.batch(bid), mapping=fields)
        pipe.rpush(bkeys.callbacks(bid), *JUNK_CALLBACKS)
        junk_members = [b"", b"\xff\xfe", b"j" * 10_000, b"a/b", b"a\nb", b"hostile-01", b"../x"]
        for suffix in ("jids", "failed", "died", "kids", "pkids", "ukids"):
            pipe.sadd(f"b-{bid}-{suffix}", *junk_members)
        pipe.zadd(bkeys.INDEX, {bid: [now, INF, -INF, -5.0, 0.0][i % 5]})
        pipe.zadd(bkeys.DEAD_INDEX, {bid: [now, -INF, INF][i % 3]})
    pipe.execute()
    # Wrong types: the hash itself, and each sub-key of an otherwise good-looking batch.
    for kind in WRONG_TYPES:
        if kind != "hash":
            bid = f"wrongtype-hash-{kind}"
            put(r, bkeys.batch(bid), kind)
            bids.append(bid)
        for suffix in bkeys.SUFFIXES:
            right = "list" if suffix == "callbacks" else "set"
            if kind == right:
                continue
            bid = f"wrongtype-{suffix}-{kind}"
            r.hset(bkeys.batch(bid), mapping={"wurk": "1", "total": "1", "pending": "1", "created_at": now})
            put(r, f"b-{bid}-{suffix}", kind)
            bids.append(bid)
    # Sidekiq Pro's own batch: its hash has other fields, its callbacks live in the hash.
    pro = "ProBatch12345a"
    r.hset(
        bkeys.batch(pro),
        mapping={
            "created_at": repr(now),
            "description": "made by Sidekiq Pro",
            "total": "3",
            "pending": "1",
            "failures": "0",
            "kids": "0",
            "cbq": "default",
            "callbacks": json.dumps({"complete": [{"ProCallback": {"a": 1}}]}),
            "callbacks2": '{"success":[NaN',
        },
    )
    r.sadd(bkeys.jids(pro), "pro-jid-1")
    r.hset(f"b-{pro}-failinfo", mapping={"pro-jid-2": '["RuntimeError","boom"]'})
    bids.append(pro)
    # A batch whose ``callbacks`` field holds JSON of every bad kind (Pro's place for them).
    r.hset(bkeys.batch("hash-callbacks"), mapping={"wurk": "1", "callbacks": nested(100_000)})
    bids.append("hash-callbacks")
    # Keys named by a bid that is not UTF-8 (reachable only through the indexes).
    r.hset(b"b-\xff\xfe", mapping={"wurk": "1", "total": "1", "pending": "1", "description": b"\xff"})
    r.sadd(b"b-\xff\xfe-kids", b"\xff")
    pipe = r.pipeline(transaction=False)
    for index in (bkeys.INDEX, bkeys.DEAD_INDEX):
        pipe.zadd(index, {member: score for member, score in JUNK_INDEX})
        for n, bid in enumerate(bids):
            pipe.zadd(index, {bid: [now, -INF, INF, -1.0][n % 4]}, nx=True)
    pipe.execute()
    return bids


# The reading API ----------------------------------------------------------------------------

STATUS_FIELDS = ("exists", "total", "pending", "succeeded_jobs", "description", "parent_bid", "callback_queue",
                 "created_at", "complete_at", "success_at", "death_at", "complete", "succeeded", "died",
                 "invalidated", "linger", "failed_jids", "dead_jids", "pending_jids", "child_bids",
                 "callbacks", "expires_in", "live", "failures", "dead", "child_count")  # fmt: skip


class Calls:
    def __init__(self, label: str) -> None:
        self.label = label
        self.problems: list[str] = []

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.problems.append(f"{self.label}: {what} raised {one_line(exc)}")
            return None


def read_status(calls: Calls, status: BatchStatus, what: str) -> None:
    for name in STATUS_FIELDS:
        calls.call(f"{what}.{name}", getattr, status, name)
    data = calls.call(f"{what}.data()", status.data)
    if data is not None:
        try:
            json.dumps(data, allow_nan=False)
        except (TypeError, ValueError) as exc:
            calls.problems.append(f"{calls.label}: {what}.data() is not strict JSON: {one_line(exc)}")
    calls.call(f"repr({what})", repr, status)
    calls.call(f"{what}.join(0)", status.join, 0, 0.01)


def test_batch_reading_api_never_raises_over_hostile_batches(wurk: Wurk, r: Any) -> None:
    bids = load_junk_batches(r, time.time())
    calls = Calls("batch API")
    for bid in [*bids, "missing-batch", "", "a/b", "\ud800", "x" * 100_000]:
        status = calls.call(f"BatchStatus({shown(bid, 40)})", BatchStatus, bid, wurk)
        if status is not None:
            read_status(calls, status, f"BatchStatus({shown(bid, 40)})")
    for cls in (BatchSet, DeadBatchSet):
        index = cls(wurk)
        name = cls.__name__
        calls.call(f"{name}.size()", index.size)
        for start, count in ((0, 25), (0, 1000), (5, 3), (10_000, 25)):
            page = calls.call(f"{name}.page({start}, {count})", index.page, start, count)
            for status in page[1] if page else []:
                read_status(calls, status, f"{name} page entry {shown(status.bid, 40)}")
        for status in calls.call(f"list({name})", list, index) or []:
            read_status(calls, status, f"{name} entry {shown(status.bid, 40)}")
        for text in (
            "hostile",
            "hostile-03",
            "\x00",
            "*",
            "[",
            "\ud800",
            "x" * 300,
            "script",
            " ",
            "ProBatch",
        ):
            for status in calls.call(f"{name}.search({shown(text, 20)})", index.search, text) or []:
                read_status(calls, status, f"{name} search hit {shown(status.bid, 40)}")
    assert not calls.problems, report({"batch API": list(dict.fromkeys(calls.problems))})


# The dashboard ------------------------------------------------------------------------------


def batch_url(bid: str, tail: str = "") -> str:
    return url("batches") + quote(bid, safe="") + "/" + tail


@pytest.mark.django_db
def test_every_batch_page_and_action_answers_over_hostile_batches(
    admin_client: Client, wurk: Wurk, r: Any
) -> None:
    bids = load_junk_batches(r, time.time())
    walker = Walker(admin_client, "batch pages")
    starts = [url("batches"), url("batches_dead")]
    for params in ("?count=100", "?page=2&count=7", "?page=-1", "?page=abc", "?count=100&page=99999"):
        starts += [url("batches") + params, url("batches_dead") + params]
    for q in ("hostile", "hostile-03", "%00", "*", "%5B", "%ED%A0%80", "x" * 300, "script", "ProBatch12345a"):
        starts += [url("batches") + "?q=" + q, url("batches_dead") + "?q=" + q]
    seen = crawl(walker, starts, url("batches"))
    opened = {t for t in seen if t.startswith(url("batches")) and t.count("/") > url("batches").count("/")}
    if not opened:
        walker.extra.append("batch pages: no batch page could be reached from the listings")

    for bid in [*bids, "missing-batch", "a b", "-", "x" * 5000, "%00", "nan"]:
        page = walker.get(batch_url(bid))
        if page is not None and page.status_code == 200 and bid not in body(page):
            walker.extra.append(f"batch pages: the page of {shown(bid, 40)} does not name it")
        status = walker.get(batch_url(bid, "status.json"))
        if status is not None and status.status_code in (200, 404):
            try:
                strict_json(status.content.decode())
            except ValueError as exc:
                walker.extra.append(f"batch pages: status.json of {shown(bid, 40)} is not strict JSON: {exc}")
        for jid in ("x", "a b", "%00", "j" * 5000):
            walker.get(batch_url(bid, f"jobs/{quote(jid, safe='')}/"))
        walker.post(url("batch_cancel"), {"bid": bid}, allowed=(302,))
    for bid in ("", "\x00", "a/b", "x" * 100_000):
        walker.post(url("batch_cancel"), {"bid": bid}, allowed=(302,))
    walker.post(url("batch_cancel"), {}, allowed=(302,))
    # The front page counts batches (the tab's badge reads the index).
    walker.get(url("changelist"), allowed=(200,))
    assert not walker.problems, report({"batch pages": walker.problems})


# Jobs with hostile bids, run by real workers --------------------------------------------------

#: Bids the one decoding policy refuses with the whole payload (dead set, with the reason),
#: before any batch code sees them.
REFUSED_BIDS = ("bid lone surrogate", "bid 1,000-deep")
#: Bids a job payload may carry: ``(label, bid value, how its batch is loaded)``.
HOSTILE_BIDS: list[tuple[str, Any, str | None]] = [
    ("bid int", 5, None),
    ("bid list", ["hostile"], None),
    ("bid object", {"bid": "x"}, None),
    ("bid null", None, None),
    ("bid true", True, None),
    ('bid ""', "", None),
    ("bid float", 1.5, None),
    ("bid 100 KB", "b" * 100_000, None),
    ("bid with a newline", "a\nb", None),
    ("bid with a quote", 'q"uote', "drains"),
    ("bid with a slash", "a/b", "drains"),
    ("bid lone surrogate", "\ud800", None),
    ("bid 1,000-deep", Raw(nested(1_000)), None),
    ("bid of a missing batch", "missing0000001", None),
    ("bid of Sidekiq Pro's batch", "ProBatch00001x", "pro"),
    ("bid of a hash with junk counters", "junkcounters01", "junk"),
    ("bid of a batch that drains with junk callbacks", "drainsjunk0001", "drains"),
    ("bid of a batch whose parent is junk", "junkparent0001", "junk-parent"),
    *[(f"bid whose b-<bid> is a {kind}", f"wrongtype{kind}", kind) for kind in ("string", "list", "set", "zset")],
    *[(f"bid whose -{suffix} is a string", f"subkey{suffix}", f"sub:{suffix}") for suffix in bkeys.SUFFIXES],
]  # fmt: skip


def load_job_batch(r: Any, bid: str, how: str, jids: list[str], now: float) -> None:
    """The batch a hostile-bid job names, loaded the way ``how`` says (its jids are members)."""
    h = bkeys.batch(bid)
    if how in WRONG_TYPES:
        put(r, h, how)
        return
    if how == "pro":
        r.hset(h, mapping={"created_at": repr(now), "total": "2", "pending": "2", "cbq": "default",
                           "callbacks": json.dumps({"complete": [{"ProCallback": {}}]})})  # fmt: skip
        r.sadd(bkeys.jids(bid), *jids)
        return
    fields: dict[str, Any] = {"wurk": "1", "created_at": repr(now), "total": str(len(jids)),
                              "pending": str(len(jids)), "parent_bid": "", "linger": "1e400",
                              "callback_queue": 'default","class":"Evil'}  # fmt: skip
    if how == "junk":
        fields.update(total="abc", pending="9" * 400, linger="abc", callback_queue="q\n")
    if how == "junk-parent":
        fields.update(parent_bid="junkcounters01", pending="nan")
    r.hset(h, mapping=fields)
    r.sadd(bkeys.jids(bid), *jids)
    r.rpush(bkeys.callbacks(bid), *[c.replace(b'"complete"', b'"' + e + b'"') for c in JUNK_CALLBACKS
                                    for e in (b"complete", b"success", b"death")])  # fmt: skip
    if how.startswith("sub:"):
        put(r, f"b-{bid}-{how[4:]}", "string")


def test_jobs_with_hostile_bids_run_once_and_the_workers_live(r: Any, fleet: Fleet, watch: LoopWatch) -> None:
    now = time.time()
    items: list[Member] = []
    batches: dict[str, tuple[str, list[str]]] = {}
    for label, bid, how in HOSTILE_BIDS:
        for flavour, fail, changes in (
            ("succeeds", False, {}),
            ("fails", True, {}),
            ("dies", True, {"retry": 0}),
        ):
            marker = f"{label} [{flavour}]@batches"
            doc = payload(marker, fail, now, {"bid": bid, **changes})
            refused = label in REFUSED_BIDS
            items.append(Member(f"{label} [{flavour}]", encode(doc, ascii=True), marker, reject=refused,
                                accept=not refused, runnable=True, fails=fail, queue="default"))  # fmt: skip
            if how is not None and isinstance(bid, str):
                batches.setdefault(bid, (how, []))[1].append(jid_for(marker))
    for bid, (how, jids) in batches.items():
        load_job_batch(r, bid, how, jids, now)
    # The parent named by "junk-parent" exists only as a hash with junk counters (loaded above).
    fleet.start(2)
    placed, good = push_interleaved(r, items, now, "batches")
    problems = finish(r, fleet, watch, "batch jobs", placed, good)
    problems["callback jobs"] = callback_problems(r)
    assert not any(problems.values()), report(problems)


def callback_problems(r: Any) -> list[str]:
    """Callback jobs fired from junk entries: dead with a readable reason, never stranded in a queue."""
    out: list[str] = []
    fired = 0
    for name in (keys.RETRY, keys.DEAD):
        for raw in r.zrange(name, 0, -1):
            doc = lenient(raw)
            text = raw.decode("utf-8", "replace")
            if CALLBACK_JOB not in text:
                continue
            fired += 1
            problem = readable_reason(doc)
            if problem:
                out.append(
                    f"callback jobs: a {name} entry has no readable reason ({problem}): {shown(text, 80)}"
                )
            if isinstance(doc, dict) and doc.get("class") == "Evil":
                out.append(
                    f"callback jobs: a callback job's fields were injected from Redis: {shown(text, 80)}"
                )
    for key in r.scan_iter(match="queue:*", count=1000):
        if r.type(key) == b"list" and key != b"queue:default":
            for raw in r.lrange(key, 0, -1):
                if CALLBACK_JOB.encode() in raw:
                    out.append(
                        f"callback jobs: a callback job sits in {key!r}, a queue nobody serves: {shown(raw)}"
                    )
    if fired < len(JUNK_CALLBACKS):
        out.append(f"callback jobs: only {fired} callback job(s) were refused; the drained batches fire more")
    return out
