"""Priority inside a queue: where a prioritised job waits, and how a queue's lists are ordered.

A Sidekiq queue is one FIFO list, ``queue:<q>``, and that is where every job of priority 0
(the default) still goes, byte for byte: a fleet that never sets a priority, and any Ruby
or older worker, sees exactly what it saw before. A job of another priority ``p`` waits in
a list of its own, named like a queue so every tool already understands it: the queue
``<q>@<p>`` (``critical@10``, ``critical@-5``), key ``queue:<q>@<p>``, listed in the
``queues`` set. Its payload keeps ``"queue": "<q>"`` and carries ``"priority": p``, so a
retry or a scheduled run goes back to the same list.

Why separate lists rather than a sorted set: a list keeps Sidekiq's wire format (a Ruby
worker told to fetch ``critical@10`` before ``critical`` runs the jobs in our order), keeps
the fetch one ``LMOVE`` per list tried (fetch.lua walks the lists in order in its one round
trip), and leaves the priority-0 path untouched. ``@`` cannot appear in our queue names
(``[a-zA-Z0-9_:.-]+``), so such a list is never mistaken for a queue of its own.

A worker learns which priorities are in use from the ``queues`` set (``PriorityLists``,
reread at most every ``REFRESH`` seconds), so the first job of a new priority waits up to
that long before a running worker looks at its list; from then on it is tried on every
fetch. Readers (the data API, the dashboard, queue gauges) fold ``<q>@<p>`` into ``<q>``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from redis.exceptions import ResponseError

#: The range ``django.tasks`` uses (``django.tasks.base.TASK_MIN_PRIORITY``/``MAX``).
LOWEST = -100
HIGHEST = 100
DEFAULT = 0
#: Between a queue's name and the priority in the name of its priority list.
SEPARATOR = "@"

_LISTED = re.compile(r"(.+)@(-?[1-9][0-9]{0,2})")


def check(value: Any, where: str) -> int:
    """``value`` as a priority, or ``ValueError`` naming ``priority`` and ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not LOWEST <= value <= HIGHEST:
        raise ValueError(
            f"{where}: priority must be an integer from {LOWEST} to {HIGHEST} (higher runs first), "
            f"got {value!r}"
        )
    return value


def of(payload: Mapping[str, Any]) -> int:
    """The priority a payload asks for; 0 for none or for a value no client of ours writes
    (another producer's ``"priority": "high"`` must not lose the job: it waits as priority 0)."""
    value = payload.get("priority")
    if value is None or type(value) is not int or not LOWEST <= value <= HIGHEST:
        return DEFAULT
    return value


def listed(queue: str, priority: int) -> str:
    """The queue name (``queues`` set member, ``queue:<name>`` key) of ``queue``'s jobs of ``priority``."""
    return queue if priority == DEFAULT else f"{queue}{SEPARATOR}{priority}"


def listed_for(queue: str, payload: Mapping[str, Any]) -> str:
    """Where ``payload``, a job of ``queue``, waits."""
    if "priority" not in payload:  # the common case: one dict lookup, nothing else
        return queue
    # A Ruby retry writes the list it fetched from as the job's queue: its queue is meant.
    return listed(split(queue)[0], of(payload))


def split(name: str) -> tuple[str, int]:
    """``("critical", 10)`` for ``critical@10``; ``(name, 0)`` for any other name."""
    if SEPARATOR not in name:
        return name, DEFAULT
    match = _LISTED.fullmatch(name)
    if match is None:
        return name, DEFAULT
    value = int(match.group(2))
    return (match.group(1), value) if LOWEST <= value <= HIGHEST else (name, DEFAULT)


def in_use(names: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """For each queue with priority lists among ``names``, its priorities other than 0, highest first."""
    found: dict[str, set[int]] = {}
    for name in names:
        base, value = split(name)
        if value != DEFAULT:
            found.setdefault(base, set()).add(value)
    return {base: tuple(sorted(values, reverse=True)) for base, values in found.items()}


def lists(queue: str, priorities: Sequence[int]) -> list[str]:
    """``queue``'s list names in the order they are fetched: highest priority first, 0 in its place."""
    if not priorities:
        return [queue]
    above = [listed(queue, p) for p in priorities if p > DEFAULT]
    below = [listed(queue, p) for p in priorities if p < DEFAULT]
    return [*above, queue, *below]


#: Seconds a worker trusts its knowledge of the priorities in use (as the paused set's).
REFRESH = 2.0


class PriorityLists:
    """The priority lists of a worker's queues, learnt from the ``queues`` set.

    One ``SMEMBERS queues`` per ``REFRESH`` seconds per process, by whichever thread finds
    the copy stale; the per-job path reads a dict. A list once seen is kept (an empty list
    costs the fetch one failed LMOVE; forgetting it would hide a job pushed a moment later).
    """

    def __init__(self, read: Any, queues: Iterable[str], refresh: float = REFRESH) -> None:
        #: Returns the members of the ``queues`` set (bytes or text).
        self._read = read
        self._queues = frozenset(queues)
        self.refresh = refresh
        #: Queue -> its priorities other than 0, highest first (only queues that have some).
        self.known: dict[str, tuple[int, ...]] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def current(self) -> dict[str, tuple[int, ...]]:
        if time.monotonic() - self._read_at < self.refresh:
            return self.known
        with self._lock:
            if time.monotonic() - self._read_at >= self.refresh:
                try:
                    members = self._read()
                except ResponseError:  # ``queues`` is not a set (another program's key): nothing learnt
                    members = ()
                names = (m.decode("utf-8", "replace") if isinstance(m, bytes) else m for m in members)
                found = in_use(names)
                merged = dict(self.known)
                for queue, values in found.items():
                    if queue in self._queues:
                        merged[queue] = tuple(sorted({*merged.get(queue, ()), *values}, reverse=True))
                self.known = merged
                self._read_at = time.monotonic()
        return self.known

    def expand(self, order: Sequence[str]) -> list[str]:
        """``order`` with each queue replaced by its lists (``lists``); ``order`` itself when none has any."""
        known = self.current()
        if not known:
            return list(order) if not isinstance(order, list) else order
        out: list[str] = []
        for queue in order:
            values = known.get(queue)
            if values:
                out += lists(queue, values)
            else:
                out.append(queue)
        return out


def waiting_order(order: list[str]) -> list[str]:
    """The lists idle threads block on, by slot: the queues' own lists first (where a fleet's
    jobs mostly arrive; exactly ``order`` when no priority is in use), then the priority lists,
    so that as threads allow, each list has a waiter."""
    if not any(SEPARATOR in name for name in order):
        return order
    return sorted(order, key=lambda name: split(name)[1] != DEFAULT)


def group(names: Iterable[bytes]) -> dict[bytes, list[bytes]]:
    """The ``queues`` set's members as readers show them: each queue (its name's exact bytes)
    with its lists, in fetch order (highest priority first, the queue's own list in its
    place). A name that is not UTF-8, or names no priority list, is a queue of its own."""
    found: dict[bytes, dict[int, bytes]] = {}
    for name in names:
        try:
            base, value = split(name.decode("utf-8"))
        except UnicodeDecodeError:
            base, value = "", DEFAULT
        raw_base = base.encode("utf-8") if value != DEFAULT else name
        found.setdefault(raw_base, {})[value] = name
    out: dict[bytes, list[bytes]] = {}
    for raw_base, by_value in found.items():
        by_value.setdefault(DEFAULT, raw_base)
        out[raw_base] = [by_value[v] for v in sorted(by_value, reverse=True)]
    return out
