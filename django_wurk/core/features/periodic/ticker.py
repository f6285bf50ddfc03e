"""The leader's firing pass: every loop of this process's configuration, once.

Per loop: read ``nf``; when it is due, claim the occurrence (``loop_claim.lua``, a
compare-and-set of ``nf`` to the next occurrence after *now*) and only then push the job,
so however many processes tick at once, one pushes. Claiming first means a push that fails
after the claim drops that occurrence (logged at ERROR) rather than risking two pushes.

Missed occurrences are not made up: after a gap (no leader, Redis down, a paused loop) the
loop fires once for the overdue occurrence, logging a warning when it is more than
``LATE_AFTER`` seconds late, and its next fire is the first occurrence after now.

The loops are the fixed ones the process was started with (``WURK["PERIODIC"]``) plus, when
the installer gave one, what a ``LoopSource`` returns: a callable the leader asks again every
``refresh`` seconds (the Django app reads its ``Schedule`` table with one). When the set of
loops changes, the new ones are registered and the gone ones pruned at once, so an edit made
at run time fires without a restart. A source that raises keeps the loops it gave last
(logged, at most once per ``COMPLAINT_INTERVAL``): a database outage never stops the loops.

``tick(now)`` takes the time as an argument (Redis's ``TIME`` when omitted), so a test can
drive the clock. A loop whose Redis data is unusable (an ``nf`` that is no time, a key of
another type) is logged and skipped or rescheduled; it never stops the pass for the others.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from django_wurk.core.features.periodic import keys
from django_wurk.core.features.periodic.loops import (
    LoopSpec,
    format_stamp,
    prune,
    read_stamp,
    record_fire,
    register,
    server_time,
    unique,
)

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.periodic")

#: A fire later than this after its occurrence is logged as a warning (Sidekiq Enterprise's 90 s).
LATE_AFTER = 90.0
#: The same complaint about one loop's data is logged at most this often (seconds).
COMPLAINT_INTERVAL = 300.0
#: How often (seconds) the leader asks a ``LoopSource`` again.
REFRESH_INTERVAL = 5.0

#: Loops decided at run time (the Django app's ``Schedule`` rows): called by the leader every
#: ``refresh`` seconds, on its service thread. It returns only loops it could build; what it
#: skipped it reports itself.
LoopSource = Callable[[], Sequence[LoopSpec]]


@dataclass(frozen=True)
class Fire:
    """One occurrence this ticker fired."""

    lid: str
    jid: str | None
    due: float
    fired_at: float


class Ticker:
    def __init__(
        self,
        wurk: Wurk,
        specs: Sequence[LoopSpec],
        source: LoopSource | None = None,
        refresh: float = REFRESH_INTERVAL,
    ) -> None:
        self.wurk = wurk
        self.fixed = unique(specs)
        self.specs = list(self.fixed)
        self.source = source
        self.refresh = refresh
        self._asked_at = -math.inf
        self._complaints: dict[tuple[str, str], float] = {}

    def take_office(self, now: float | None = None) -> None:
        """What a new leader does first: register its loops, and prune every other one.

        The leader's own configuration is the truth: a loop removed from settings (or a
        schedule deleted or disabled) stops firing and leaves the dashboard once a process
        of the new configuration leads.
        """
        self._ask_source(force=True)
        self._register_all(now)

    def _register_all(self, now: float | None = None) -> None:
        redis = self.wurk.redis
        now = server_time(redis) if now is None else now
        for spec in self.specs:
            try:
                register(redis, spec, now)
            except ResponseError as exc:
                if "WRONGTYPE" not in str(exc):
                    raise
                self._complain(spec, f"cannot be registered: {exc}")
        gone = prune(redis, [spec.lid for spec in self.specs])
        if gone:
            logger.info(
                "pruned %d periodic loop(s) not in this configuration: %s",
                len(gone),
                ", ".join(lid.decode("utf-8", "replace") for lid in gone),
            )

    def _ask_source(self, force: bool = False) -> bool:
        """Ask the source for its loops when ``refresh`` has passed; True if they changed."""
        if self.source is None:
            return False
        at = time.monotonic()
        if not force and at - self._asked_at < self.refresh:
            return False
        self._asked_at = at
        try:
            found = unique([*self.fixed, *self.source()])
        except Exception as exc:  # the database is down, say: keep firing what we have
            self._complain_about_source(exc)
            return False
        changed = [s.lid for s in found] != [s.lid for s in self.specs]
        self.specs = found
        return changed

    def tick(self, now: float | None = None) -> list[Fire]:
        """One pass over every loop; returns what fired. Redis outages are raised."""
        if self._ask_source():
            logger.info("periodic loops changed: %d now", len(self.specs))
            self._register_all(now)
        if not self.specs:
            return []
        redis = self.wurk.redis
        now = server_time(redis) if now is None else now
        fired: list[Fire] = []
        for spec in self.specs:
            try:
                fire = self._tick_loop(spec, now)
            except ResponseError as exc:
                if "WRONGTYPE" not in str(exc):
                    raise
                self._complain(spec, f"is skipped: its key is not a hash ({exc})")
                continue
            except RedisError:
                raise
            except Exception as exc:  # one loop's bug must not stop the others
                logger.exception("periodic %s failed", spec.label)
                self.wurk.report_error(exc, {"context": "periodic", "lid": spec.lid})
                continue
            if fire is not None:
                fired.append(fire)
        return fired

    def _tick_loop(self, spec: LoopSpec, now: float) -> Fire | None:
        redis, scripts = self.wurk.redis, self.wurk.scripts
        key = keys.loop(spec.lid)
        raw = redis.hget(key, "nf")
        if raw is None:
            # Not registered (pruned by a leader of another configuration, or deleted): again.
            register(redis, spec, now)
            return None
        upcoming = spec.next_fire(now)
        due = read_stamp(raw)
        if due is None or due > upcoming:
            # Junk, or later than the schedule can produce: it would never (or wrongly) fire.
            self._complain(
                spec, f"had an unusable next fire {raw[:40]!r}; rescheduled to the next occurrence"
            )
            scripts.claim_loop(key, raw, format_stamp(upcoming), reschedule=True)
            return None
        if due > now:
            return None
        status, server_now = scripts.claim_loop(key, raw, format_stamp(upcoming))
        if status == 2:
            logger.info("periodic %s is paused: the occurrence due at %s is skipped", spec.label, _iso(due))
            return None
        if status != 1:
            return None  # another process claimed it first
        late = now - due
        if late > LATE_AFTER:
            logger.warning(
                "periodic %s fired %.0f s late (due at %s); missed occurrences are not made up, "
                "the next is at %s",
                spec.label,
                late,
                _iso(due),
                _iso(upcoming),
            )
        fired_at = read_stamp(server_now) or now
        try:
            jid = self.wurk.client.push(spec.payload(), delivery=spec.delivery())
        except Exception:
            logger.exception(
                "periodic %s: the occurrence due at %s was claimed but its push failed; it is dropped",
                spec.label,
                _iso(due),
            )
            raise
        if jid is not None:
            try:
                record_fire(redis, spec.lid, fired_at, jid)
            except ResponseError as exc:  # the job is pushed: only its history entry is lost
                if "WRONGTYPE" not in str(exc):
                    raise
                self._complain(spec, f"could not record its fires: its history key is not a list ({exc})")
        logger.debug("periodic %s fired: jid %s", spec.label, jid)
        return Fire(spec.lid, jid, due, fired_at)

    def _complain(self, spec: LoopSpec, message: str) -> None:
        """Log a problem with one loop's data, at most once per ``COMPLAINT_INTERVAL``."""
        if self._first_time(spec.lid, message):
            logger.error("periodic %s %s", spec.label, message)

    def _complain_about_source(self, exc: Exception) -> None:
        if self._first_time("(source)", type(exc).__name__):
            logger.warning(
                "periodic: could not read the loops decided at run time (%s: %s); firing the %d known",
                type(exc).__name__,
                exc,
                len(self.specs),
            )

    def _first_time(self, about: str, message: str) -> bool:
        at = time.monotonic()
        last = self._complaints.get((about, message))
        if last is not None and at - last < COMPLAINT_INTERVAL:
            return False
        self._complaints[(about, message)] = at
        return True


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
