"""The bad-data corpus against the worker loops (issue 10's general guard).

Each test pushes the whole corpus (``tests/hostile/corpus.py``) into the keys one loop reads,
among good jobs, while real workers run (two in-process worker engines, three threads each):

* the processor: ``queue:<name>`` lists;
* the poller: the ``retry`` and ``schedule`` sorted sets, with odd scores;
* the reaper: dead workers' private lists ``queue:sq|<identity>|<queue>``, dead in every odd way;
* the heartbeat and the poller's process cleanup: ``processes``, process hashes, ``<identity>:work``,
  odd ``queues``/``paused`` names, stats and metrics keys holding junk.

Then, with polls and deadlines: the workers are alive (every processor and loop thread
running, heartbeats fresh, no loop crashed or failed a pass); every good job ran exactly once;
every hostile member ran at most once and is accounted for exactly once (run, or one retry or
dead entry with a readable reason, the original bytes kept when it was refused); nothing is
left in a private list or due in the retry or schedule set. Every problem is collected and
reported in one list per loop, each naming the member and where it was found.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from django_wurk.core import keys, wire
from tests.hostile.conftest import SERVED, Fleet, poll_until, settle
from tests.hostile.corpus import (
    DUE_SCORES,
    FUTURE_SCORES,
    Draft,
    Member,
    drafts,
    good_payload,
    load_odd_processes_queues_and_stats,
    members,
    payload,
)
from tests.hostile.ledger import LoopWatch, Placed, Snapshot, account, account_good, report


def heartbeats(r: Any, fleet: Fleet, label: str) -> list[str]:
    """Each worker's process hash gets fresh beats (a worker that stops beating is reaped alive)."""
    since = time.time()

    def beating() -> bool:
        beats = [r.hget(identity, "beat") for identity in fleet.identities()]
        return all(b is not None and float(b) > since for b in beats)

    if poll_until(beating, 5.0):
        return []
    return [
        f"{label}: worker {identity} stopped heartbeating (beat {r.hget(identity, 'beat')!r}, "
        f"in processes: {bool(r.sismember(keys.PROCESSES, identity))})"
        for identity in fleet.identities()
        if not ((b := r.hget(identity, "beat")) is not None and float(b) > since)
    ]


def finish(
    r: Any,
    fleet: Fleet,
    watch: LoopWatch,
    label: str,
    placed: list[Placed],
    good: dict[str, str],
    waiting_good: dict[str, str] | None = None,
) -> dict[str, list[str]]:
    """Settle, look at everything while the workers still run, stop them, and list the problems."""
    problems = settle(r, fleet, label)
    snap = Snapshot.take(r)
    problems += fleet.problems(label)
    problems += heartbeats(r, fleet, label)
    problems += fleet.stop(label)
    problems += account(placed, snap, SERVED, label)
    problems += account_good(good, snap, label, waiting_good)
    return {label: problems, f"{label} (what the loops reported)": watch.problems(label)}


def push_interleaved(
    r: Any, items: list[Member], now: float, where: str
) -> tuple[list[Placed], dict[str, str]]:
    """Each member into a served queue, a good job right behind it."""
    placed: list[Placed] = []
    good: dict[str, str] = {}
    pipe = r.pipeline(transaction=False)
    pipe.sadd(keys.QUEUES, *SERVED)
    for i, member in enumerate(items):
        queue = keys.queue(SERVED[i % len(SERVED)])
        pipe.lpush(queue, member.raw)
        placed.append(Placed(member, queue))
        job = good_payload(i, now, "default", tag=where)
        pipe.lpush(queue, wire.dumps(job))
        good[job["jid"]] = queue
    pipe.execute()
    return placed, good


# The processor --------------------------------------------------------------------------------


def test_processor_runs_buries_or_records_every_queued_member(r: Any, fleet: Fleet, watch: LoopWatch) -> None:
    fleet.start(2)
    now = time.time()
    placed, good = push_interleaved(r, members("queue", now), now, "default")
    problems = finish(r, fleet, watch, "processor", placed, good)
    assert not any(problems.values()), report(problems)


# The poller -----------------------------------------------------------------------------------


def test_poller_promotes_or_buries_every_due_entry_and_never_stops_at_one(
    r: Any, fleet: Fleet, watch: LoopWatch
) -> None:
    fleet.start(2)
    now = time.time()
    placed: list[Placed] = []
    good: dict[str, str] = {}
    waiting: dict[str, str] = {}
    due_scores = itertools.cycle([*DUE_SCORES, now - 10])
    pipe = r.pipeline(transaction=False)
    for name in (keys.RETRY, keys.SCHEDULE):
        items = members(name, now)
        # The first few are not due: they must stay exactly as they are.
        for i, member in enumerate(items):
            score = FUTURE_SCORES[i] if i < len(FUTURE_SCORES) else next(due_scores)
            pipe.zadd(name, {member.raw: score})
            placed.append(Placed(member, name))
            # A good entry just after each poison one, due too...
            job = good_payload(i, now, "default" if i % 2 else "critical", tag=name)
            pipe.zadd(name, {wire.dumps(job): score if score < now else now - 5})
            good[job["jid"]] = name
        # ...and good entries that are not due, at every odd future score.
        for i, score in enumerate((*FUTURE_SCORES, now + 3600)):
            job = good_payload(i, now, "default", tag=f"{name} not due")
            pipe.zadd(name, {wire.dumps(job): score})
            waiting[job["jid"]] = f"{name} at {score!r}"
    pipe.execute()
    problems = finish(r, fleet, watch, "poller", placed, good, waiting)
    assert not any(problems.values()), report(problems)


# The reaper -----------------------------------------------------------------------------------

#: Dead workers, each dead in its own way: (name, identity, what its process hash holds).
GHOSTS: list[tuple[str, bytes, Any]] = [
    ("no process hash", b"ghost:1:000000000001", None),
    ("beat 'abc'", b"ghost:2:000000000002", {"beat": "abc"}),
    ("beat 'nan'", b"ghost:3:000000000003", {"beat": "nan"}),
    ("beat '-inf'", b"ghost:4:000000000004", {"beat": "-inf"}),
    ("beat 'inf'", b"ghost:5:000000000005", {"beat": "inf"}),
    ("beat ''", b"ghost:6:000000000006", {"beat": ""}),
    ("beat an hour old", b"ghost:7:000000000007", {"beat": "OLD"}),
    ("beat '1e999'", b"ghost:8:000000000008", {"beat": "1e999"}),
    ("a hash without beat", b"ghost:9:000000000009", {"info": "{}", "busy": "abc"}),
    ("identity not UTF-8", b"ghost:\xff\xfe:10", None),
    ("identity with a '|'", b"ghost|x:11:000000000011", None),
    ("identity key holding a list", b"ghost:12:000000000012", "LIST"),
    ("identity key holding a string", b"ghost:13:000000000013", "STRING"),
]


def bury_ghost(r: Any, identity: bytes, hash_value: Any, now: float) -> None:
    if hash_value == "LIST":
        r.rpush(identity, b"not a hash")
    elif hash_value == "STRING":
        r.set(identity, b"\xff not a hash")
    elif hash_value is not None:
        r.hset(identity, mapping={k: (repr(now - 3600) if v == "OLD" else v) for k, v in hash_value.items()})


def test_reaper_recovers_every_dead_workers_private_list(r: Any, fleet: Fleet, watch: LoopWatch) -> None:
    now = time.time()
    items = members("private", now)
    placed: list[Placed] = []
    good: dict[str, str] = {}
    lists: dict[bytes, list[bytes]] = {}
    for i, member in enumerate(items):
        _, identity, _ = GHOSTS[i % len(GHOSTS)]
        queue = SERVED[(i // len(GHOSTS)) % len(SERVED)]
        key = keys.PRIVATE_QUEUE_PREFIX.encode() + identity + b"|" + queue.encode()
        lists.setdefault(key, [])
        job = good_payload(i, now, queue, tag="private")
        lists[key] += [member.raw, wire.dumps(job).encode()]
        placed.append(Placed(member, key.decode("utf-8", "backslashreplace")))
        good[job["jid"]] = key.decode("utf-8", "backslashreplace")
    # A key that looks like a private list but is not a list: a reaper must step past it.
    r.set(keys.private_queue("ghost:14:000000000014", "default"), b"not a list")

    def load(half: int) -> None:
        for n, (_, identity, hash_value) in enumerate(GHOSTS):
            if n % 2 != half:
                continue
            bury_ghost(r, identity, hash_value, now)
            for key, raws in lists.items():
                if key.startswith(keys.PRIVATE_QUEUE_PREFIX.encode() + identity + b"|"):
                    r.rpush(key, *raws)

    load(0)  # there when the workers start: the start-up sweep
    fleet.start(2)
    load(1)  # dying while they run: the periodic reaper
    problems = finish(r, fleet, watch, "reaper", placed, good)
    assert not any(problems.values()), report(problems)


# The heartbeat, the poller's process cleanup, stats ----------------------------------------------


def test_workers_keep_beating_among_odd_processes_queues_and_stats(
    r: Any, fleet: Fleet, watch: LoopWatch
) -> None:
    now = time.time()
    load_odd_processes_queues_and_stats(r, now)
    fleet.start(2)
    for identity in fleet.identities():
        # Remote signals no dashboard sends.
        r.lpush(keys.signals(identity), b"\xff\xfe", b"", b"KILL", b"s" * 10_000)
    # Good jobs, and well-formed jobs that fail, so each beat has processed and failed counts to flush.
    items = []
    for i in range(30):
        marker = f"fails cleanly {i}@stats"
        items.append(
            Member(marker, wire.dumps(payload(marker, True, now)).encode(), marker, runnable=True, fails=True)
        )
    placed, good = push_interleaved(r, items, now, "default")
    problems = finish(r, fleet, watch, "heartbeat", placed, good)
    if r.sismember(keys.PROCESSES, b"odd:6:hash-expired"):
        problems["heartbeat"].append("poller cleanup: a process whose hash expired is still in 'processes'")
    assert not any(problems.values()), report(problems)


# Generated variations ---------------------------------------------------------------------------

#: Where a generated member is put: a served queue, the retry or schedule set (due), or a dead
#: worker's private list.
PLACES = ("queue", "retry", "schedule", "private")
GHOST = "ghost:99:000000000099"


def generated(count: int) -> list[tuple[Draft, str]]:
    """``count`` Hypothesis examples of (member, place), the same on every run (derandomized).

    Drawn before any worker starts and run through the workers in one go: one settle for them
    all, and no worker thread touches ``random`` while Hypothesis draws.
    """
    out: list[tuple[Draft, str]] = []

    @settings(
        max_examples=count,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(st.tuples(drafts(), st.sampled_from(PLACES)))
    def collect(example: tuple[Draft, str]) -> None:
        out.append(example)

    collect()
    return out


def test_generated_members_are_run_or_buried_exactly_once(r: Any, fleet: Fleet, watch: LoopWatch) -> None:
    """Random bytes, random JSON values, mangled real payloads and real Sidekiq payloads with
    random fields replaced, each put in one of the places a loop reads, among good jobs."""
    examples = generated(300)
    fleet.start(2)
    now = time.time()
    placed: list[Placed] = []
    good: dict[str, str] = {}
    seen: set[bytes] = set()
    pipe = r.pipeline(transaction=False)
    for i, (draft, place) in enumerate(examples):
        member = draft.build(f"g{i}")
        if member.raw in seen:
            continue  # one copy of each byte string, so each can be traced
        seen.add(member.raw)
        member = replace(member, name=f"#{i} {draft!r}"[:240])
        job = good_payload(i, now, "default", tag="generated")
        good_raw = wire.dumps(job)
        if place == "queue":
            where = keys.queue("default")
            pipe.lpush(where, member.raw, good_raw)
        elif place == "private":
            where = keys.private_queue(GHOST, "default")
            pipe.rpush(where, member.raw, good_raw)
        else:
            where = place
            pipe.zadd(where, {member.raw: DUE_SCORES[i % len(DUE_SCORES)], good_raw: now - 1})
        placed.append(Placed(member, where))
        good[job["jid"]] = where
    pipe.execute()
    problems = finish(r, fleet, watch, "generated", placed, good)
    assert not any(problems.values()), report(problems)
