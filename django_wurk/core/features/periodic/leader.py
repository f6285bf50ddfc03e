"""Leader election: one process of the whole fleet holds the leader key at a time.

Every worker process campaigns (unless kept out with ``WURK["LEADER"] = False``). The
leader's identity (its ``host:pid:nonce``) sits in the leader key (``wurk-leader``, or
``LEADER_KEY``; Sidekiq Enterprise's ``dear-leader`` only when asked for) with a ttl: taken with
``SET NX PX``, renewed every ttl/2 by compare-and-expire, given back at stop by
compare-and-delete, each one Lua script (``core/lease.py``), counted down by Redis's
clock. Followers try to take it every ``FOLLOWER_RETRY`` seconds (or ttl/2 if shorter),
and sooner when the key's remaining ttl (``PTTL``) says it ends before then: they wake
just after it expires, so a dead leader is replaced about one ttl after its last renewal.

Failure modes: a leader killed with -9 stops renewing, its key expires within the ttl, and
a follower takes over at its next try, timed by the key's ``PTTL`` (within the ttl plus
one pass of the service's thread, at most a second; ttl + ``FOLLOWER_RETRY`` if the ``PTTL``
could not be read). A
leader cut off from Redis stops acting as leader once its own clock says the ttl has passed
since its last successful renewal (``Lease.held``), which is no later than the key expires,
so two processes never both believe they lead (clock drift apart; and the claim of each
occurrence is a compare-and-set anyway, so even then nothing fires twice). A quieted (TSTP)
leader keeps leading; a stopping one resigns at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django_wurk.core.features.periodic import keys
from django_wurk.core.lease import Lease
from django_wurk.core.scripts import Scripts

logger = logging.getLogger("django_wurk.periodic")

#: The lifetime of the leader key (seconds) unless ``WURK["LEADER_TTL"]`` says otherwise.
DEFAULT_TTL = 30.0
#: How often a follower tries to become the leader (seconds), at most.
FOLLOWER_RETRY = 5.0
#: How long after the holder's lease should have ended a follower tries (seconds).
EXPIRY_MARGIN = 0.01


class Campaign:
    """One process's bid for leadership; ``step()`` is called by its service's thread."""

    def __init__(
        self,
        scripts: Scripts,
        identity: str,
        ttl: float = DEFAULT_TTL,
        remaining: Callable[[], float | None] | None = None,
        key: str = keys.LEADER,
    ) -> None:
        self.identity = identity
        self.key = key
        self.lease = Lease(scripts, key, identity, ttl)
        #: Seconds until the current holder's lease ends, if known (the key's ``PTTL``).
        self._remaining = remaining
        self.ttl = ttl
        self._leading = False
        self._next_step = float("-inf")

    @property
    def interval(self) -> float:
        """Seconds until the next step: renew at half the ttl, retry a little more often."""
        return self.ttl / 2 if self._leading else min(FOLLOWER_RETRY, self.ttl / 2)

    def due(self) -> bool:
        return time.monotonic() >= self._next_step

    def step(self) -> bool:
        """Renew if leading, else try to take the lead; True when this process just took it.

        Redis errors are raised (the caller's loop reports the outage); the next step is
        then due at once, so a short outage does not cost a whole interval.
        """
        if self._leading:
            if not self.lease.renew():
                self._leading = False
                logger.warning("%s lost the lead (its lease expired or was taken)", self.identity)
            self._schedule()
            return False
        taken = self.lease.acquire()
        if taken:
            self._leading = True
            logger.info("%s is now the leader", self.identity)
        self._schedule()
        if not taken and self._remaining is not None:
            left = self._remaining()
            if left is not None:
                self._next_step = min(self._next_step, time.monotonic() + left + EXPIRY_MARGIN)
        return taken

    def _schedule(self) -> None:
        self._next_step = time.monotonic() + self.interval

    def leading(self) -> bool:
        """Whether this process surely holds the lead now, by its own clock (no round trip)."""
        return self._leading and self.lease.held()

    def resign(self) -> None:
        """Give the lead back (at stop), so a follower takes over at its next try."""
        if not self._leading:
            return
        self._leading = False
        if self.lease.release():
            logger.info("%s resigned as leader", self.identity)
