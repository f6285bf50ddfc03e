"""A lease: one holder at a time across every process, for a bounded time.

The reaper and the outbox relay each run in one process at a time (and the leader of
periodic jobs will): the holder writes its token into a key that expires. Taking it is
``SET NX PX``; extending it compares the token and then sets the expiry; giving it back
compares and then deletes. Each step is one Lua script (``lua/lease_*.lua``), so a holder
whose lease expired while it worked can neither extend nor delete the lease someone else
took since.

Time is the server's: a lease is sent as a duration and counted down by Redis, never as a
moment on the holder's clock, so machines whose clocks disagree still agree on who holds
it. What a holder can know locally is a lower bound: ``held()`` stays true until the ttl
has passed since the moment it *sent* the last successful acquire or renew, so it turns
false no later than the key expires (clock drift apart).
"""

from __future__ import annotations

import time

from django_wurk.core.scripts import Scripts


class Lease:
    """The lease ``key``, as seen by the holder ``owner`` (a token unique to it)."""

    def __init__(self, scripts: Scripts, key: str, owner: str, ttl: float) -> None:
        if ttl <= 0:
            raise ValueError(f"a lease needs a positive ttl, got {ttl!r}")
        self.scripts = scripts
        self.key = key
        self.owner = owner
        self.ttl = ttl
        self._ttl_ms = max(int(ttl * 1000), 1)
        self._until = float("-inf")

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; False if anyone does (this owner too: use ``renew``)."""
        sent = time.monotonic()
        taken = self.scripts.acquire_lease(self.key, self.owner, self._ttl_ms)
        if taken:
            self._until = sent + self.ttl
        return taken

    def renew(self) -> bool:
        """Extend the lease by ``ttl`` from now, only if this owner still holds it."""
        sent = time.monotonic()
        renewed = self.scripts.renew_lease(self.key, self.owner, self._ttl_ms)
        self._until = sent + self.ttl if renewed else float("-inf")
        return renewed

    def release(self) -> bool:
        """Give the lease back, only if this owner still holds it; False if it did not."""
        self._until = float("-inf")
        return self.scripts.release_lease(self.key, self.owner)

    def held(self) -> bool:
        """Whether this owner surely still holds the lease, by its own clock (no round trip)."""
        return time.monotonic() < self._until
