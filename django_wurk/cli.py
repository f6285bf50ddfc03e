"""``manage.py wurk``: the operations of the dashboard, from a terminal or a script.

Each subcommand is one function over the data API (``django_wurk.core.api`` and the
features' sets), returning an ``Outcome``: the data (printed as one JSON document with
``--json``, for scripts) and the lines a person reads. The command (``management/commands/
wurk.py``) only parses the arguments and prints. A failure raises ``Failure`` with its exit
status:

* 0: done (or, for a listing, listed);
* 1: the operation could not be done: what it names is not there (a jid, a queue, a batch,
  a process, a loop), or the person answered no;
* 2: the command line is wrong (argparse's own status): bad JSON, a missing ``--yes``
  where nobody can be asked;
* 69 (``EX_UNAVAILABLE``): Redis does not answer.

Destructive operations on a whole queue ask first, unless ``--yes``; long ones (``retry
--all``) show their progress on a terminal (never in ``--json`` output or a pipe).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from django_wurk.core import wire
from django_wurk.core.api import (
    DeadSet,
    JobRecord,
    Process,
    ProcessSet,
    Queue,
    RetrySet,
    ScheduledSet,
    SortedEntry,
    SortedSet,
    Stats,
)
from django_wurk.core.engine import wurk
from django_wurk.core.job import Setter

#: Exit statuses (see the module docstring).
OK, FAILED, USAGE, UNAVAILABLE = 0, 1, 2, 69
#: Rows a listing shows unless ``--limit`` says otherwise.
DEFAULT_LIMIT = 25
#: Characters of an argument list or error message shown in a text row.
PREVIEW = 80


class Failure(Exception):
    """The operation could not be done; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = FAILED) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Outcome:
    data: Any
    lines: list[str] = field(default_factory=list)


@dataclass
class Terminal:
    """Where a subcommand may ask and show progress: only a person at a terminal."""

    out: TextIO
    interactive: bool
    ask: Callable[[str], str] = input

    def confirm(self, question: str, yes: bool) -> None:
        if yes:
            return
        if not self.interactive:
            raise Failure(f"{question} Nobody to ask here: pass --yes", USAGE)
        if self.ask(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
            raise Failure("not done: answered no")

    def progress(self, what: str) -> Callable[[int, int], None] | None:
        if not self.interactive:
            return None

        def show(seen: int, total: int) -> None:
            self.out.write(f"\r{what}: {seen:,} of {total:,}")
            if seen >= total:
                self.out.write("\n")
            self.out.flush()

        return show


# --- reading --------------------------------------------------------------------------------


def stats(options: dict[str, Any], terminal: Terminal) -> Outcome:
    s = Stats(wurk)
    data = {
        "processed": s.processed, "failed": s.failed, "expired": s.expired, "enqueued": s.enqueued,
        "scheduled": s.scheduled_size, "retries": s.retry_size, "dead": s.dead_size,
        "processes": s.processes_size, "busy": s.workers_size,
        "default_queue_latency": round(s.default_queue_latency, 3), "queues": s.queues,
    }  # fmt: skip
    lines = [f"{name:>22}  {value:,}" for name, value in data.items() if isinstance(value, int)]
    lines.append(f"{'default queue latency':>22}  {data['default_queue_latency']:.3f} s")
    return Outcome(data, lines)


def queues(options: dict[str, Any], terminal: Terminal) -> Outcome:
    rows = [{"name": q.name, "size": q.size(), "latency": round(q.latency(), 3), "paused": q.paused()}
            for q in Queue.all(wurk)]  # fmt: skip
    lines = [f"{'QUEUE':<30} {'SIZE':>10} {'LATENCY':>10}  PAUSED"]
    lines += [
        f"{r['name']:<30} {r['size']:>10,} {r['latency']:>9.1f}s  {'yes' if r['paused'] else ''}"
        for r in rows
    ]
    return Outcome(rows, lines)


def processes(options: dict[str, Any], terminal: Terminal) -> Outcome:
    now = time.time()
    rows = [_process(p, now) for p in ProcessSet(wurk)]
    lines = [f"{'IDENTITY':<40} {'BUSY':>9} {'BEAT':>7}  QUEUES"]
    for row in rows:
        state = " quiet" if row["quiet"] else ""
        busy = f"{row['busy']}/{row['concurrency']}"
        lines.append(
            f"{row['identity']:<40} {busy:>9} {row['beat_age']:>6.0f}s  {','.join(row['queues'])}{state}"
        )
    return Outcome(rows, lines)


def _process(p: Process, now: float) -> dict[str, Any]:
    return {
        "identity": p.identity, "hostname": p.hostname, "pid": p.pid, "tag": p.tag, "queues": p.queues,
        "concurrency": p.concurrency, "busy": p.busy, "quiet": p.stopping, "leader": p.leader,
        "version": p.version, "started_at": p.started_at, "beat_age": round(max(now - p.beat, 0.0), 1),
        "rss_kb": p.rss,
    }  # fmt: skip


SETS: dict[str, type[SortedSet]] = {"retry": RetrySet, "dead": DeadSet, "scheduled": ScheduledSet}


def listing(kind: str) -> Callable[[dict[str, Any], Terminal], Outcome]:
    """``wurk retry``, ``wurk dead``, ``wurk scheduled``: the newest (or, for scheduled, the
    soonest) ``--limit`` entries."""

    def run(options: dict[str, Any], terminal: Terminal) -> Outcome:
        sorted_set = SETS[kind](wurk)
        limit = options["limit"]
        total, entries = sorted_set.page(0, limit, newest_first=kind != "scheduled")
        rows = [_entry(e) for e in entries]
        lines = [f"{total:,} in {kind}" + (f", the first {len(rows)}:" if total > len(rows) else ":")]
        for row in rows:
            when = (
                datetime.fromtimestamp(row["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
                if _finite(row["at"])
                else "?"
            )
            error = f"  {row['error_class']}: {_cut(row['error_message'])}" if row["error_class"] else ""
            lines.append(
                f"{when}  {row['jid'] or row['key']:<24}  {row['class']}({_cut(row['call'])}){error}"
            )
        return Outcome({"total": total, "entries": rows}, lines)

    return run


def _entry(entry: SortedEntry) -> dict[str, Any]:
    return {**_record(entry), "key": entry.key, "at": entry.at}


def _record(record: JobRecord) -> dict[str, Any]:
    kwargs = record.get("kwargs") if record.payload is not None else None
    keywords = kwargs if isinstance(kwargs, dict) else {}
    args = record.display_args
    call = ", ".join([*(wire.dumps(a) for a in args), *(f"{k}={wire.dumps(v)}" for k, v in keywords.items())])
    return {
        "jid": record.jid, "class": record.job_class, "queue": record.queue, "args": args, "kwargs": keywords,
        "call": call, "error_class": record.error_class, "error_message": record.error_message,
        "retry_count": record.get("retry_count"), "readable": record.payload is not None,
    }  # fmt: skip


# --- acting on jobs ------------------------------------------------------------------------


def retry(options: dict[str, Any], terminal: Terminal) -> Outcome:
    """``wurk retry`` lists; ``wurk retry JID`` retries one (from the retry, else the dead set);
    ``wurk retry --all [--dead]`` every entry of the retry (or dead) set."""
    if options["all"]:
        source = DeadSet(wurk) if options["dead"] else RetrySet(wurk)
        done = source.retry_all(progress=terminal.progress(f"retrying {source.name}"))
        return Outcome({"retried": done, "set": source.name}, [f"{done:,} retried from {source.name}"])
    if not options["jid"]:
        return listing("dead" if options["dead"] else "retry")(options, terminal)
    entry = _find(options["jid"], [DeadSet] if options["dead"] else [RetrySet, DeadSet])
    if not entry.retry():
        raise Failure(f"job {options['jid']} could not be retried (it moved meanwhile, or is unreadable)")
    return Outcome(
        {"retried": entry.jid, "from": entry.parent.name}, [f"retried {entry.jid} from {entry.parent.name}"]
    )


def kill(options: dict[str, Any], terminal: Terminal) -> Outcome:
    entry = _find(options["jid"], [RetrySet, ScheduledSet])
    if not entry.kill():
        raise Failure(f"job {options['jid']} could not be killed (it moved meanwhile)")
    return Outcome({"killed": entry.jid, "from": entry.parent.name}, [f"killed {entry.jid} (moved to dead)"])


def delete(options: dict[str, Any], terminal: Terminal) -> Outcome:
    jid = options["jid"]
    if options["queue"]:
        queue = Queue(options["queue"], wurk)
        record = queue.find_job(jid)
        if record is None or not queue.delete_job(record):
            raise Failure(f"no job {jid} in queue {options['queue']!r}")
        return Outcome(
            {"deleted": jid, "from": f"queue:{queue.name}"}, [f"deleted {jid} from queue {queue.name}"]
        )
    entry = _find(jid, [RetrySet, ScheduledSet, DeadSet])
    if not entry.delete():
        raise Failure(f"job {jid} could not be deleted (it moved meanwhile)")
    return Outcome({"deleted": jid, "from": entry.parent.name}, [f"deleted {jid} from {entry.parent.name}"])


def _find(jid: str, kinds: Sequence[type[SortedSet]]) -> SortedEntry:
    for kind in kinds:
        entry = kind(wurk).find_job(jid)
        if entry is not None:
            return entry
    where = ", ".join(kind.name for kind in kinds)
    raise Failure(f"no job {jid} in {where}")


# --- queues and processes ------------------------------------------------------------------


def clear(options: dict[str, Any], terminal: Terminal) -> Outcome:
    queue = _queue(options["queue"])
    size = queue.size()
    terminal.confirm(f"Delete the {size:,} job(s) in queue {queue.name!r}?", options["yes"])
    queue.clear()
    return Outcome({"cleared": queue.name, "jobs": size}, [f"cleared queue {queue.name} ({size:,} jobs)"])


def pause(options: dict[str, Any], terminal: Terminal) -> Outcome:
    queue = _queue(options["queue"])
    queue.pause()
    return Outcome({"paused": queue.name}, [f"paused queue {queue.name}: workers take nothing from it"])


def unpause(options: dict[str, Any], terminal: Terminal) -> Outcome:
    queue = _queue(options["queue"])
    queue.unpause()
    return Outcome({"unpaused": queue.name}, [f"unpaused queue {queue.name}"])


def _queue(name: str) -> Queue:
    queue = Queue(name, wurk)
    if not queue.known() and not queue.paused():
        raise Failure(f"no queue {name!r} (known: {', '.join(q.name for q in Queue.all(wurk)) or 'none'})")
    return queue


def signal(verb: str) -> Callable[[dict[str, Any], Terminal], Outcome]:
    """``wurk quiet`` / ``wurk stop``: IDENTITY, or ``--all``."""

    def run(options: dict[str, Any], terminal: Terminal) -> Outcome:
        found = list(ProcessSet(wurk))
        if options["all"]:
            chosen = found
        else:
            chosen = [p for p in found if p.identity == options["identity"]]
            if not chosen:
                raise Failure(f"no process {options['identity']!r} (see `manage.py wurk processes`)")
        for process in chosen:
            process.quiet() if verb == "quiet" else process.stop()
        names = [p.identity for p in chosen]
        return Outcome({verb: names}, [f"{verb}: {n}" for n in names] or ["no processes"])

    return run


# --- enqueue, batches, periodic --------------------------------------------------------------


def enqueue(options: dict[str, Any], terminal: Terminal) -> Outcome:
    from django_wurk.periodic import find_job

    job_class = find_job(options["job"], wurk.registry)
    if job_class is None:
        raise Failure(f"no registered job is named {options['job']!r} (a wire name or a dotted path)")
    args = _json(options["args_json"], list, "ARGS_JSON must be a JSON list of positional arguments")
    kwargs = _json(options["kwargs"], dict, "--kwargs must be a JSON object of keyword arguments")
    setter: Setter[...] = Setter(job_class, {"queue": options["queue"]} if options["queue"] else {})
    try:
        if options["in"] is not None:
            jid = setter.perform_in(options["in"], *args, **kwargs)
        else:
            jid = setter.perform_async(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise Failure(str(exc), USAGE) from None
    if jid is None:
        raise Failure("a client middleware dropped the job (a unique lock held, say)")
    return Outcome({"jid": jid, "class": job_class.wire_name}, [jid])


def _json(text: str | None, kind: type, message: str) -> Any:
    if text is None:
        return kind()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Failure(f"{message}: {exc}", USAGE) from None
    if not isinstance(value, kind):
        raise Failure(f"{message}, got {type(value).__name__}", USAGE)
    return value


def batch(options: dict[str, Any], terminal: Terminal) -> Outcome:
    from django_wurk.core.features.batches import BatchStatus

    status = BatchStatus(options["bid"], wurk)
    if not status.exists:
        raise Failure(f"no batch {options['bid']!r}")
    data = {
        "bid": status.bid, "description": status.description, "total": status.total,
        "pending": status.pending, "failures": status.failures, "dead": status.dead,
        "succeeded": status.succeeded_jobs, "complete": status.complete, "success": status.succeeded,
        "created_at": status.created_at, "complete_at": status.complete_at, "success_at": status.success_at,
        "parent_bid": status.parent_bid, "children": status.child_count,
        "pending_children": status.pending_children, "failed_jids": status.failed_jids,
    }  # fmt: skip
    state = "succeeded" if status.succeeded else "complete" if status.complete else "running"
    lines = [
        f"batch {status.bid}: {status.description or '(no description)'}",
        f"  {state}: {data['succeeded']:,} of {data['total']:,} succeeded, {data['pending']:,} pending, "
        f"{data['failures']:,} failing, {data['dead']:,} dead",
    ]
    if status.child_count:
        lines.append(f"  {status.child_count} child batch(es), {status.pending_children} pending")
    return Outcome(data, lines)


def periodic(options: dict[str, Any], terminal: Terminal) -> Outcome:
    """``wurk periodic`` lists the loops; ``wurk periodic run NAME`` enqueues one now."""
    from django_wurk.core.features.periodic import LoopSet, current_leader

    loops = list(LoopSet(wurk))
    if options["action"] == "run":
        loop = _loop(options["name"], loops)
        try:
            jid = loop.enqueue_now()
        except (ValueError, LookupError) as exc:
            raise Failure(str(exc)) from None
        return Outcome({"lid": loop.lid, "jid": jid}, [f"enqueued {loop.klass} now: {jid}"])
    rows = [{
        "lid": loop.lid, "cron": loop.schedule, "job": loop.klass, "args": loop.args, "kwargs": loop.kwargs,
        "tz": loop.tz, "paused": loop.paused,
        "next_fire": loop.next_fire.timestamp() if loop.next_fire else None,
        "last_fire": loop.last_fire.timestamp() if loop.last_fire else None,
    } for loop in loops]  # fmt: skip
    leader = current_leader(wurk)
    lines = [f"leader: {leader or 'none'}", f"{'LID':<17} {'CRON':<16} {'TZ':<16} {'NEXT (UTC)':<20} JOB"]
    for loop in loops:
        nxt = loop.next_fire.strftime("%Y-%m-%d %H:%M") if loop.next_fire else "?"
        state = " (paused)" if loop.paused else ""
        lines.append(f"{loop.lid:<17} {loop.schedule:<16} {loop.tz:<16} {nxt:<20} {loop.klass}{state}")
    return Outcome({"leader": leader, "loops": rows}, lines)


def _loop(name: str, loops: list[Any]) -> Any:
    """A loop by its lid, the name of the ``Schedule`` row it came from, or its job (when one
    loop alone runs that job)."""
    by_lid = [loop for loop in loops if loop.lid == name]
    if by_lid:
        return by_lid[0]
    from django_wurk.models import Schedule
    from django_wurk.schedules import loop_spec

    row = Schedule.objects.filter(name=name).first()
    if row is not None:
        try:
            lid = loop_spec(row, wurk.registry).lid
        except (TypeError, ValueError) as exc:
            raise Failure(f"schedule {name!r} cannot run: {exc}") from None
        for loop in loops:
            if loop.lid == lid:
                return loop
        raise Failure(f"schedule {name!r} is not registered yet (disabled, or no leader has read it)")
    by_job = [loop for loop in loops if loop.klass == name]
    if len(by_job) == 1:
        return by_job[0]
    if by_job:
        raise Failure(
            f"{len(by_job)} loops run {name!r}: name one by its lid ({', '.join(lp.lid for lp in by_job)})"
        )
    raise Failure(f"no periodic loop {name!r} (a lid, a schedule's name, or a job)")


def _cut(text: str) -> str:
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def _finite(value: float) -> bool:
    return value == value and abs(value) < 1e11
