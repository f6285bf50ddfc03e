"""Where did each hostile member end up? Accounting for the corpus tests.

After the workers have settled, every member must be found exactly once: run (a job that
succeeded), or one trace in the retry or dead set (a failure, or a refusal with the original
bytes), or legitimately waiting (a future score, or a queue nobody serves that its payload
names). Anything else is a problem, described in one line naming the member and where it is:
left in a private list or a queue, still due in the retry or schedule set, run twice, lost.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django_wurk.core import keys
from tests.hostile.corpus import GOOD_RUNS, RUNS, Member

SETS = (keys.RETRY, keys.SCHEDULE, keys.DEAD)


def one_line(exc: BaseException) -> str:
    """``Type: message`` and the innermost frame, short enough for a list of problems."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = (
        f" (at {frames[-1].filename.rsplit('/', 2)[-1]}:{frames[-1].lineno} in {frames[-1].name})"
        if frames
        else ""
    )
    text = str(exc).replace("\n", "\\n")
    return f"{type(exc).__name__}: {text[:200]}{where}"


def lenient(raw: bytes) -> Any:
    """Whatever Python's own parser makes of ``raw`` (NaN allowed), or ``None``."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def strings(value: Any, depth: int = 3) -> Iterator[str]:
    """Every string in ``value`` down to ``depth`` levels (where an envelope keeps the original)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            yield item
        elif level < depth and isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif level < depth and isinstance(item, list):
            stack.extend((v, level + 1) for v in item)


def readable_reason(doc: Any) -> str | None:
    """The problem with an entry's reason, or ``None`` if it has a readable one."""
    if not isinstance(doc, dict):
        return "the entry is not a JSON object, so it has no error_message"
    message = doc.get("error_message")
    if not isinstance(message, str) or not message.strip():
        return f"error_message is {message!r}"
    if not isinstance(doc.get("error_class"), str):
        return f"error_class is {doc.get('error_class')!r}"
    return None


def _reason(e: Entry) -> str:
    message = e.doc.get("error_message") if isinstance(e.doc, dict) else None
    return f"{e.where}: {str(message)[:120]!r}"


def short(raw: bytes, limit: int = 60) -> str:
    text = repr(raw[:limit])
    return text + (f"... ({len(raw):,} bytes)" if len(raw) > limit else "")


@dataclass
class Entry:
    where: str
    raw: bytes
    score: float | None
    doc: Any
    marker: str | None
    texts: frozenset[str]


@dataclass
class Snapshot:
    """Every list under ``queue:`` (queues and private lists) and the three sorted sets."""

    lists: dict[str, list[bytes]]
    sets: dict[str, list[tuple[bytes, float]]]
    runs: dict[str, int]
    good: dict[str, int]
    at: float = field(default_factory=time.time)

    @classmethod
    def take(cls, r: Any) -> Snapshot:
        lists: dict[str, list[bytes]] = {}
        for key in r.scan_iter(match="queue:*", count=1000):
            if r.type(key) == b"list":
                lists[key.decode("utf-8", "backslashreplace")] = r.lrange(key, 0, -1)
        sets = {name: r.zrange(name, 0, -1, withscores=True) for name in SETS}
        runs = {k.decode("utf-8", "surrogatepass"): int(v) for k, v in r.hgetall(RUNS).items()}
        good = {k.decode(): int(v) for k, v in r.hgetall(GOOD_RUNS).items()}
        return cls(lists, sets, runs, good)

    def entries(self) -> Iterator[Entry]:
        for name, rows in self.sets.items():
            for raw, score in rows:
                yield self._entry(name, raw, score)
        for name, items in self.lists.items():
            for raw in items:
                yield self._entry(name, raw, None)

    @staticmethod
    def _entry(where: str, raw: bytes, score: float | None) -> Entry:
        doc = lenient(raw)
        marker = doc.get("corpus") if isinstance(doc, dict) else None
        return Entry(
            where, raw, score, doc, marker if isinstance(marker, str) else None, frozenset(strings(doc))
        )

    def private_lists(self) -> dict[str, list[bytes]]:
        return {k: v for k, v in self.lists.items() if k.startswith(keys.PRIVATE_QUEUE_PREFIX) and v}


def _texts_of(raw: bytes) -> set[str]:
    """How an envelope may hold ``raw``: as text, or base64 (the exact bytes, any alphabet)."""
    out = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    with contextlib.suppress(UnicodeDecodeError):
        out.add(raw.decode("utf-8"))
    return out


@dataclass
class Placed:
    member: Member
    #: Where the test put it ("queue:default", "retry", a private list...).
    source: str


def account(
    placed: Iterable[Placed],
    snap: Snapshot,
    served: Iterable[str],
    label: str,
) -> list[str]:
    """One line per member that is not where it should be; ``label`` names the test's loop.

    ``served``: the queues the running workers read (a job resting in any other queue its
    payload names is waiting, not stranded).
    """
    served_lists = {keys.queue(q) for q in served}
    groups: dict[str | bytes, list[Placed]] = defaultdict(list)
    for p in placed:
        groups[p.member.ident].append(p)
    entries = list(snap.entries())
    by_marker: dict[str, list[Entry]] = defaultdict(list)
    by_raw: dict[bytes, list[Entry]] = defaultdict(list)
    by_text: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_raw[e.raw].append(e)
        if e.marker is not None:
            by_marker[e.marker].append(e)
        # An entry with a marker belongs to that member; one without may hold a refused member's
        # bytes (as text, or base64) in one of its strings.
        if e.where in (keys.RETRY, keys.DEAD) and e.marker is None:
            for t in e.texts:
                by_text[t].append(e)

    problems: list[str] = []
    for group in groups.values():
        member = group[0].member
        sources = Counter(p.source for p in group)
        found: dict[int, Entry] = {}
        for e in by_raw.get(member.raw, []):
            found[id(e)] = e
        if member.marker is not None:
            for e in by_marker.get(member.marker, []):
                found[id(e)] = e
        for text in _texts_of(member.raw):
            for e in by_text.get(text, []):
                found[id(e)] = e
        traces: list[Entry] = []
        waiting: list[Entry] = []
        stranded: list[str] = []
        for e in found.values():
            due = e.score is not None and e.score <= snap.at
            if e.where in (keys.RETRY, keys.SCHEDULE) and e.raw == member.raw:
                if due:
                    stranded.append(f"still due in {e.where} (score {e.score!r}): never promoted nor buried")
                else:
                    waiting.append(e)
            elif e.where in (keys.RETRY, keys.DEAD):
                traces.append(e)
            elif e.where == keys.SCHEDULE:
                if due:
                    stranded.append(f"a copy is due in schedule (score {e.score!r})")
                else:
                    waiting.append(e)
            elif e.where.startswith(keys.PRIVATE_QUEUE_PREFIX):
                stranded.append(f"left in the private list {e.where!r}")
            elif e.where in served_lists:
                stranded.append(f"left in {e.where!r}, a queue the workers serve")
            elif member.queue is not None and e.where == keys.queue(member.queue):
                waiting.append(e)
            else:
                stranded.append(f"pushed to {e.where!r}, a queue its payload does not name")
        runs = snap.runs.get(member.marker, 0) if member.marker is not None else 0
        n = len(group)
        say = f"{label}: {member.name!r} (from {', '.join(sorted(sources))}; {short(member.raw)})"
        why: list[str] = list(stranded)
        in_dead = [e for e in traces if e.where == keys.DEAD]
        if runs > 1:
            why.append(f"ran {runs} times")
        if runs and not member.runnable:
            why.append("its class is not registered, yet it ran")
        if len(traces) > n:
            why.append(
                f"{len(traces)} traces for {n} member(s): " + ", ".join(sorted(e.where for e in traces))
            )
        if member.reject:
            if runs:
                why.append("must be refused, but it ran")
            # A copy resting at a future score is not due: it waits, like any entry there.
            if len(in_dead) + len(waiting) < n and not stranded:
                why.append(
                    f"must be in the dead set {n} time(s), found {len(in_dead)}"
                    + (f" (and {len(traces) - len(in_dead)} in retry)" if len(traces) > len(in_dead) else "")
                )
            for e in in_dead:
                if e.raw != member.raw and not (_texts_of(member.raw) & e.texts):
                    why.append("its dead entry does not keep the original bytes")
        elif member.accept and runs != 1 and not stranded and not waiting:
            refused = f" (refused: {_reason(traces[0])})" if traces and not runs else ""
            why.append(f"a valid job must run exactly once, it ran {runs} times{refused}")
        if not member.reject and not stranded and not waiting:
            # A member whose marker a mangling destroyed ({"corp()": ...}) runs, when it does,
            # under no marker: a clean run of it leaves nothing to count (the queues it could be
            # stranded in are checked above). Which examples Hypothesis draws depends on the
            # constants in the project's modules, so any new test module may draw one.
            traceable = member.marker is not None or member.fails or not member.runnable
            if runs == 0 and not traces and traceable:
                why.append("lost: it never ran and left no trace in the retry or dead set")
            if runs == 1 and member.fails and not traces:
                why.append("it failed, but no retry or dead entry records the failure")
            if runs == 1 and not member.fails and traces:
                why.append(f"it succeeded, yet it also left a trace in {traces[0].where}")
        for e in traces:
            problem = readable_reason(e.doc)
            if problem:
                why.append(f"its {e.where} entry has no readable reason: {problem}")
        if why:
            problems.append(f"{say}: {'; '.join(dict.fromkeys(why))}")
    return problems


def account_good(
    expected: dict[str, str], snap: Snapshot, label: str, waiting: dict[str, str] | None = None
) -> list[str]:
    """Good jobs (jid -> where they were put) ran exactly once; ``waiting`` ones not at all.

    One line per place and outcome, with a count, so a blocked loop does not bury the report.
    """
    wrong: Counter[tuple[str, int]] = Counter()
    for jid, where in expected.items():
        runs = snap.good.get(jid, 0)
        if runs != 1:
            wrong[(where, runs)] += 1
    problems = [
        f"{label}: {n} good job(s) from {where} ran {runs} time(s) (each must run exactly once)"
        for (where, runs), n in sorted(wrong.items())
    ]
    for jid, where in (waiting or {}).items():
        if runs := snap.good.get(jid, 0):
            problems.append(f"{label}: good job {jid} in {where} is not due, yet it ran {runs} time(s)")
    return problems


# Watching the loops --------------------------------------------------------------------------------


class LoopWatch(logging.Handler):
    """Collects what the worker loops report about themselves: crashes, failed passes, claims that
    Redis is down (with a live server, a misread reply), failed start-up sweeps."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: Counter[str] = Counter()
        # A crash is both logged and sent to the error handlers: count each exception once.
        self._seen: list[BaseException] = []

    def _once(self, exc: BaseException, line: str) -> None:
        if any(exc is seen for seen in self._seen):
            return
        self._seen.append(exc)
        self.lines[line] += 1

    def error_handler(self, exc: BaseException, context: dict[str, Any]) -> None:
        where = context.get("context", "?")
        if where == "Job raised exception":
            return  # a job failing is the normal path, recorded by the retry handler
        self._once(exc, f"{where}: {one_line(exc)}")

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().replace("\n", "\\n")[:300]
        if record.exc_info and record.exc_info[1] is not None:
            self._once(record.exc_info[1], f"{record.name}: {text}: {one_line(record.exc_info[1])}")
        elif (
            (record.name == "django_wurk.redis" and record.levelno >= logging.ERROR)
            or record.levelno >= logging.CRITICAL
            or ("sweep" in text and "failed" in text)
        ):
            self.lines[f"{record.name}: {text}"] += 1

    def problems(self, label: str) -> list[str]:
        return [f"{label}: {line} (x{n})" for line, n in sorted(self.lines.items())]


def report(problems: dict[str, list[str]]) -> str:
    """Every problem, grouped by loop, numbered; what the final ``assert`` prints."""
    out = []
    total = sum(len(v) for v in problems.values())
    for loop, items in problems.items():
        if items:
            out.append(f"\n== {loop}: {len(items)} problem(s)")
            out.extend(f"  {i}. {line}" for i, line in enumerate(items, 1))
    return f"{total} problem(s) with hostile data:" + "\n".join(out)
