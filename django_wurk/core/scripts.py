"""The Lua scripts, one typed method each, run one way.

Every multi-step change that must be atomic (take the next jobs from the first queue
that has one, promote a due entry, bury, requeue, push once, hold a lease) is a script in
``django_wurk/core/lua/<name>.lua``, whose header says its keys, arguments and reply.
``Scripts`` gives each one a method whose signature names them, so a caller never counts
KEYS and ARGV by hand, and builds the key names the scripts touch from ``keys``.

A ``Scripts`` is bound to one way of sending a command: a client's ``execute_command``
(the pool, any thread) or a ``Line``'s ``call`` (one thread's own connection: the per-job
fetch). Both run through ``_run``: EVALSHA, and on NOSCRIPT (a restarted server, a
``SCRIPT FLUSH``) SCRIPT LOAD and EVALSHA once more. No script is sent as EVAL text.

A bulk action (the data API's "retry all", "kill all") runs one script once per entry; one
round trip per entry made 100,000 entries cost 100,000 round trips, so ``run_each`` sends a
chunk of calls in one pipeline instead. Each call is still its own atomic script.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

from django_wurk.core import keys

#: Sends one command and returns its reply: ``Redis.execute_command`` or ``Line.call``.
Call = Callable[..., Any]
#: Sends commands in one write and returns their replies, raising the first error reply
#: after reading them all: ``Line.pipeline``.
Pipeline = Callable[[list[tuple[Any, ...]]], list[Any]]

#: Bytes: a finished job larger than this is acknowledged by its own LREM, not inside the
#: fetch script. Copying an argument into Lua costs Redis about 1 us per KB; a command of
#: its own costs the worker a reply to read, a few us: past a few KB the command is cheaper
#: (10 KB jobs: Redis 33 -> 24 us a job, the worker about 4 us more).
ACK_IN_SCRIPT_BYTES = 4096


@dataclass(frozen=True)
class Script:
    name: str
    source: str
    sha: str

    @classmethod
    def load(cls, name: str) -> Script:
        source = (
            resources.files("django_wurk.core").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")
        )
        return cls(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())


FETCH = Script.load("fetch")
PROMOTE = Script.load("promote")
BURY = Script.load("bury")
REQUEUE = Script.load("requeue")
PUSH_ONCE = Script.load("push_once")
LEASE_ACQUIRE = Script.load("lease_acquire")
LEASE_RENEW = Script.load("lease_renew")
LEASE_RELEASE = Script.load("lease_release")
BATCH = Script.load("batch")
LOOP_CLAIM = Script.load("loop_claim")
LOOP_PAUSE = Script.load("loop_pause")
UNIQUE_LOCK = Script.load("unique_lock")
CELERY_RESTORE = Script.load("celery_restore")
LIMITER = Script.load("limiter")
LIMITER_SWEEP = Script.load("limiter_sweep")
HISTORY_SNAPSHOT = Script.load("history_snapshot")
DEBOUNCE = Script.load("debounce")
THROTTLE_SLOT = Script.load("throttle_slot")

ALL = (
    FETCH,
    PROMOTE,
    BURY,
    REQUEUE,
    PUSH_ONCE,
    LEASE_ACQUIRE,
    LEASE_RENEW,
    LEASE_RELEASE,
    BATCH,
    LOOP_CLAIM,
    LOOP_PAUSE,
    UNIQUE_LOCK,
    CELERY_RESTORE,
    LIMITER,
    LIMITER_SWEEP,
    HISTORY_SNAPSHOT,
    DEBOUNCE,
    THROTTLE_SLOT,
)


def run_each(redis: Any, script: Script, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> list[Any]:
    """Run ``script`` once per ``(keys, args)`` in ``calls``, all in one round trip (a pipeline).

    The replies come in order; an error reply is returned as its exception, not raised, so
    one refused call does not hide what the others did. A NOSCRIPT reply means that call ran
    nothing, so those calls alone are sent again after a SCRIPT LOAD.
    """
    replies: list[Any] = [None] * len(calls)
    pending = list(range(len(calls)))
    for attempt in range(2):
        pipe = redis.pipeline(transaction=False)
        for i in pending:
            script_keys, args = calls[i]
            pipe.execute_command("EVALSHA", script.sha, len(script_keys), *script_keys, *args)
        again = []
        for i, reply in zip(pending, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(reply, NoScriptError) and attempt == 0:
                again.append(i)
            else:
                replies[i] = reply
        if not again:
            break
        redis.execute_command("SCRIPT", "LOAD", script.source)
        pending = again
    return replies


def promote_each(redis: Any, source: str, moves: Sequence[tuple[bytes, str, str]]) -> list[Any]:
    """``Scripts.promote`` for each ``(member, queue, payload)``, in one round trip (``run_each``)."""
    return run_each(
        redis,
        PROMOTE,
        [((source, keys.QUEUES, keys.queue(q)), (member, q, body)) for member, q, body in moves],
    )


def bury_each(
    redis: Any, source: str, members: Sequence[bytes], at: float, drop_before: float, max_jobs: int
) -> list[Any]:
    """``Scripts.bury`` with ``source`` for each member, moved unchanged, in one round trip."""
    head = (repr(at),)
    tail = (repr(drop_before), max_jobs)
    return run_each(redis, BURY, [((keys.DEAD, source), (*head, m, *tail, m)) for m in members])


class Scripts:
    """The scripts over one connection (see the module docstring for which)."""

    def __init__(self, call: Call, pipeline: Pipeline | None = None) -> None:
        self._call = call
        self._pipeline = pipeline

    def _run(self, script: Script, script_keys: Sequence[Any], args: Sequence[Any]) -> Any:
        call = self._call
        try:
            return call("EVALSHA", script.sha, len(script_keys), *script_keys, *args)
        except NoScriptError:
            call("SCRIPT", "LOAD", script.source)
            return call("EVALSHA", script.sha, len(script_keys), *script_keys, *args)

    # Fetching (fetch.lua) ------------------------------------------------------------

    def fetch(
        self,
        sources: Sequence[str],
        done: Sequence[tuple[str, bytes]],
        most: int = 1,
        spread: int = 1,
        budget: int = 1 << 62,
        caps: Sequence[tuple[int, int, str]] = (),
    ) -> list[Any] | None:
        """Acknowledge the ``done`` jobs (each its private list and payload), take the next ones.

        ``sources`` is each queue's key followed by its private list, in fetch order. Up to
        ``most`` jobs are taken from the first non-empty queue, one more only per ``spread``
        jobs still waiting in it, and none more once they hold ``budget`` bytes. The reply is
        None when every queue was empty and readable; else ``[queue key, n, n jobs]``
        (``b"", 0`` when nothing was taken) followed by ``queue key, bad key, its type`` for
        each queue whose key (or private list) is not a list.

        A job larger than ``ACK_IN_SCRIPT_BYTES`` is acknowledged by a plain ``LREM`` written
        together with the script, still one round trip, rather than passed through Lua (see
        fetch.lua); this needs the ``pipeline`` this ``Scripts`` was made with (without one,
        those LREMs go first, alone).

        ``caps`` holds, for each capped list in ``sources``, the index of its queue key there
        (from 0), its queue's cap and that queue's holder set (``keys.cap_holders``); without
        caps the script gets exactly the arguments it got before caps existed.
        """
        args: list[Any] = [0]
        large: list[tuple[Any, ...]] = []
        for private, raw in done:
            if len(raw) > ACK_IN_SCRIPT_BYTES:
                large.append(("LREM", private, -1, raw))
            else:
                args += (private, raw)
        args[0] = (len(args) - 1) // 2
        args += (most, spread, budget)
        if caps:
            args.append(len(caps))
            for index, cap, holders in caps:
                args += (index + 1, cap, holders)  # Lua counts from 1
        if large:
            if self._pipeline is None:
                for command in large:
                    self._call(*command)
            else:
                command = ("EVALSHA", FETCH.sha, len(sources), *sources, *args)
                try:
                    reply: list[Any] | None = self._pipeline([*large, command])[-1]
                    return reply
                except NoScriptError:  # the LREMs went through; the script is loaded and run below
                    pass
        found: list[Any] | None = self._run(FETCH, sources, args)
        return found

    # Moving entries between keys -----------------------------------------------------

    def promote(self, source: str, member: bytes, queue: str, payload: str) -> bool:
        """Take ``member`` out of the sorted set ``source`` and push ``payload`` onto ``queue``.

        An empty ``payload`` only removes the member. False when it was gone already;
        WRONGTYPE (nothing changed) when the queue's key is not a list.
        """
        return bool(self._run(PROMOTE, (source, keys.QUEUES, keys.queue(queue)), (member, queue, payload)))

    def bury(
        self,
        payload: str | bytes,
        at: float,
        drop_before: float,
        max_jobs: int,
        source: str | None = None,
        member: bytes | None = None,
    ) -> bool:
        """Add ``payload`` to the dead set (score ``at``), trimmed by age and size.

        With ``source``, only if ``member`` could be taken out of that sorted set first.
        """
        args: list[Any] = [repr(at), payload, repr(drop_before), max_jobs]
        if source is None:
            return bool(self._run(BURY, (keys.DEAD,), args))
        args.append(member)
        return bool(self._run(BURY, (keys.DEAD, source), args))

    def requeue(
        self,
        private: str | bytes,
        raw: bytes,
        payload: str | bytes,
        queue: str | bytes,
        *,
        behind: bool = False,
    ) -> bool:
        """Move ``raw`` out of a private list to the tail of ``queue`` (fetched next), as ``payload``;
        ``behind`` the jobs waiting instead (the head, where a new job goes).

        False when ``raw`` was no longer there; WRONGTYPE when the queue's key is not a list.
        ``private`` and ``queue`` may be the exact bytes read from Redis (a name that is not
        UTF-8 must reach the same key, not a re-encoded one).
        """
        target = b"queue:" + queue if isinstance(queue, bytes) else keys.queue(queue)
        args = (raw, payload, "", queue, "", "", "1" if behind else "")
        return bool(self._run(REQUEUE, (private, target, keys.QUEUES), args))

    def bury_fetched(
        self,
        private: str | bytes,
        raw: bytes,
        payload: str | bytes,
        queue: str | bytes,
        at: float,
        drop_before: float,
        max_jobs: int,
    ) -> bool:
        """Move ``raw`` out of a private list into the dead set, as ``payload``, trimmed as ``bury``."""
        args = (raw, payload, repr(at), queue, repr(drop_before), max_jobs)
        return bool(self._run(REQUEUE, (private, keys.DEAD, keys.QUEUES), args))

    def push_once(self, marker: str, ttl: int, queue: str, payload: str, at: float | None, jid: str) -> bool:
        """Push ``payload`` (to ``queue``, or the schedule when ``at`` is given) unless ``marker`` exists.

        The marker is set for ``ttl`` seconds and holds ``jid``. False: pushed before.
        """
        return bool(
            self._run(
                PUSH_ONCE,
                (marker, keys.QUEUES, keys.queue(queue), keys.SCHEDULE),
                (ttl, queue, payload, "" if at is None else repr(at), jid),
            )
        )

    # Leases (see django_wurk.core.lease) ---------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl_ms: int) -> bool:
        return bool(self._run(LEASE_ACQUIRE, (key,), (owner, ttl_ms)))

    def renew_lease(self, key: str, owner: str, ttl_ms: int) -> bool:
        return bool(self._run(LEASE_RENEW, (key,), (owner, ttl_ms)))

    def release_lease(self, key: str, owner: str) -> bool:
        return bool(self._run(LEASE_RELEASE, (key,), (owner,)))

    # Unique jobs (unique_lock.lua; released with release_lease) ----------------------

    def lock_unique(self, locks: Sequence[tuple[str, str, int]]) -> list[int | bytes]:
        """Take each ``(key, jid, ttl seconds)`` lock in order; per lock 1 taken, 2 already
        this jid's, 3 the key is not a lock, or the holding jid (bytes): refused.

        Released by ``release_lease(key, jid)``: the same compare-and-delete.
        """
        script_keys = [key for key, _, _ in locks]
        args: list[Any] = []
        for _, jid, ttl in locks:
            args += (jid, ttl)
        reply: list[int | bytes] = self._run(UNIQUE_LOCK, script_keys, args)
        return reply

    # Debounce and throttle (debounce.lua, throttle_slot.lua) -------------------------

    def debounce(self, jobs: Sequence[tuple[str, str, float, float, float, str]]) -> list[list[Any]]:
        """Extend or start each ``(burst key, jid, wait, max_wait, not_before, body)`` burst, in
        order; ``max_wait`` < 0 is none, ``body`` the payload's JSON without its jid and its
        opening brace. Per job ``[jid it runs under, fire time, 1 extended / 0 new / 2 stray]``."""
        script_keys: list[Any] = [keys.SCHEDULE]
        args: list[Any] = []
        for burst, jid, wait, max_wait, not_before, body in jobs:
            script_keys.append(burst)
            args += (jid, repr(float(wait)), repr(float(max_wait)), repr(float(not_before)), body)
        reply: list[list[Any]] = self._run(DEBOUNCE, script_keys, args)
        return reply

    def throttle(self, jobs: Sequence[tuple[str, str, float]]) -> list[list[Any]]:
        """Ask each ``(key prefix, jid, slot seconds)`` for its slot, in order; per job
        ``[1, jid]`` admitted, ``[0, holder jid]`` refused, ``[2, jid]`` a stray key replaced."""
        args: list[Any] = []
        for _, jid, slot in jobs:
            args += (jid, repr(float(slot)))
        reply: list[list[Any]] = self._run(THROTTLE_SLOT, [prefix for prefix, _, _ in jobs], args)
        return reply

    # Batches (batch.lua) ----------------------------------------------------------------

    def batch(self, argv: Sequence[Any]) -> Any:
        """One step of a batch's life (``core/features/batches/script.py`` builds ``argv``).

        The script names every batch key from the bid in ``argv``, so it takes no KEYS.
        """
        return self._run(BATCH, (), argv)

    # A Celery broker (the Celery drain binds Scripts to the broker's connection) -------

    def celery_restore(
        self, unacked: str, unacked_index: str, queue_list: str, tag: bytes, entry: bytes, message: str
    ) -> bool:
        """Move kombu's unacked ``entry`` (under ``tag``) back onto ``queue_list`` as ``message``.

        False when the entry is gone or changed since it was read (acknowledged, restored).
        """
        return bool(self._run(CELERY_RESTORE, (unacked, unacked_index, queue_list), (tag, entry, message)))

    # Periodic loops (see django_wurk.core.features.periodic) ----------------------------

    def claim_loop(
        self, loop_key: str | bytes, seen: bytes | str, next_fire: str, reschedule: bool = False
    ) -> tuple[int, str]:
        """Move the loop's ``nf`` from ``seen`` to ``next_fire`` if no one did first.

        Returns ``(status, server time)``: 1 claimed (push the job), 2 claimed while paused
        (skip it), 3 rescheduled (``reschedule``: ``seen`` was unusable), 0 lost or not due.
        """
        reply = self._run(LOOP_CLAIM, (loop_key,), (seen, next_fire, "reschedule" if reschedule else "fire"))
        status, now = reply
        return int(status), now.decode() if isinstance(now, bytes) else str(now)

    def pause_loop(self, loop_key: str | bytes, paused: bool) -> bool:
        """Set the loop's ``paused`` flag; False when no such loop is registered."""
        return bool(self._run(LOOP_PAUSE, (loop_key,), ("1" if paused else "0",)))

    # Rate limiters (limiter.lua, limiter_sweep.lua) -----------------------------------

    def limiter(
        self,
        script_keys: Sequence[str],
        op: str,
        limiter: Sequence[Any],
        now: float | None,
        args: Sequence[Any],
    ) -> list[Any]:
        """One step of a limiter (``core/features/limiters/`` builds the arguments).

        ``script_keys`` are the metadata hash, the name set, the state key and (concurrent
        limiters) the counters; ``limiter`` is its name, type, options JSON, fingerprint and
        TTL; ``now`` is None for the server's clock (a test may give one). The reply's
        shape depends on ``op``: see the script's header.
        """
        stamp = "" if now is None else repr(float(now))
        reply: list[Any] = self._run(LIMITER, script_keys, (op, *limiter, stamp, *args))
        return reply

    def sweep_limiters(self, names_key: str, meta_keys: Sequence[bytes], names: Sequence[bytes]) -> int:
        """Remove from ``names_key`` each name whose metadata hash is gone; how many were."""
        return int(self._run(LIMITER_SWEEP, (names_key, *meta_keys), names))

    # Historical metrics (history_snapshot.lua) -------------------------------------------

    def record_history(
        self,
        stream: str,
        leader: str,
        identity: str,
        gap_ms: int,
        retention_ms: int,
        max_entries: int,
        fields: Sequence[tuple[str, str]],
    ) -> tuple[int, str]:
        """Append a snapshot to ``stream`` if ``identity`` holds ``leader`` and the newest entry
        is at least ``gap_ms`` old; trimmed to ``retention_ms`` and ``max_entries``.

        Returns ``(status, detail)``: 1 written (the ID), 0 not the leader, 2 too soon (ms to
        wait), 3 the key is of another type (which), 4 the newest entry is in the future (its ID).
        """
        flat = [part for pair in fields for part in pair]
        status, detail = self._run(
            HISTORY_SNAPSHOT, (stream, leader), (identity, gap_ms, retention_ms, max_entries, *flat)
        )
        return int(status), detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
