"""Fleet-wide queue caps (``WURK["QUEUE_CAPS"] = {"critical": 20}``): what the fetch sends.

At most ``cap`` jobs of a capped queue are held at once across every process. The count is
made inside the fetch's own Lua call (fetch.lua), from what reliable fetch keeps anyway: a
job a process holds (running, taken along, or finished and not acknowledged yet) is in its
private list, so the jobs held are the lengths of the private lists that took jobs of the
queue, which the script keeps in the queue's holder set (``keys.cap_holders``). Nothing
needs releasing: an acknowledgement (in the script or by a plain LREM), a push back, a stop
that requeues, and the reaper's recovery of a dead process's private lists all shorten a
list, and that frees the slot. A process killed with ``kill -9`` so holds its slots until
the reaper recovers its jobs (``PROCESS_DEAD_AFTER`` after its last heartbeat).

The count is conservative: a job taken along and not started, or finished and not yet
acknowledged, holds its slot, so the jobs running are never more than the cap. A Ruby
Sidekiq process does not join the holder set: the cap is kept among django-wurk workers.

A processor thread never waits on a capped queue with a blocking ``BLMOVE`` (it would take a
job past the cap); it polls every ``CAP_POLL`` seconds instead, only when every queue it
fetches from is empty or capped.
"""

from __future__ import annotations

from collections.abc import Sequence

from django_wurk.core import keys, priority
from django_wurk.core.config import Config

#: Seconds between fetches of a thread whose turn to wait falls on a capped queue.
CAP_POLL = 0.25


class QueueCaps:
    """The caps of a worker's queues, and the script arguments for one fetch order."""

    def __init__(self, config: Config) -> None:
        #: Queue -> (cap, holder set key).
        self.caps = {name: (cap, keys.cap_holders(name)) for name, cap in config.queue_caps}

    def __bool__(self) -> bool:
        return bool(self.caps)

    def capped(self, name: str) -> bool:
        """Whether the list ``name`` (a queue, or one of its priority lists) belongs to a capped queue."""
        return priority.split(name)[0] in self.caps

    def args(self, order: Sequence[str]) -> list[tuple[int, int, str]]:
        """``Scripts.fetch``'s ``caps`` for lists tried in ``order`` (queue key at index 2 * position)."""
        found = []
        for at, name in enumerate(order):
            cap = self.caps.get(priority.split(name)[0])
            if cap is not None:
                found.append((2 * at, *cap))
        return found
