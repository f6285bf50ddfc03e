"""What every rate limiter shares: its name and options, ``within_limit``, waiting, status.

A limiter is a description (kind, name, options) and nothing else in the process: every
decision is one step of ``core/lua/limiter.lua`` on the server's clock, so all processes
on all hosts that share the Redis share the limit. Creating one touches nothing; the first
``within_limit`` registers it (``lmtr:<name>``, ``lmtr-list``), so a module may build its
limiters at import time, before any setting is read.

When the limit holds, a call waits up to ``wait_timeout`` seconds for it to lift, then
raises ``OverLimit``. In a job, the limiters' server middleware catches that and
reschedules the job (see ``middleware``); anywhere else the caller decides.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from django_wurk.core import wire
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.limiters import keys, names

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.wire import Payload

logger = logging.getLogger("django_wurk.limiter")

#: Keys of a limiter live at least this long after its last use (Sidekiq Enterprise's floor).
MIN_TTL = 86_400
#: ... and by default 90 days.
DEFAULT_TTL = 90 * 86_400
#: A job is rescheduled this many times by default before it dies as rate limited.
DEFAULT_RESCHEDULE = 20

#: ``backoff(limiter, payload, exc)`` -> seconds until a rate-limited job runs again.
Backoff = Callable[["Limiter | None", "Payload", BaseException], float]

#: Calendar intervals, in seconds (a day is a UTC day).
INTERVALS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}


class OverLimit(Exception):
    """The limit held past the wait: the operation did not run.

    ``limiter`` is the limiter that refused it. Raised out of a job, the job is rescheduled
    (not counted as a failure) unless it has been rescheduled too often already.
    """

    #: Raised out of an ``encrypt=True`` job, the exception is concealed (docs/encryption.md)
    #: but keeps the limiter, which is configuration, not job data: the limiter middleware
    #: around the job needs it to reschedule the job by that limiter's rules.
    kept_when_encrypted: ClassVar[tuple[str, ...]] = ("limiter",)

    def __init__(self, limiter: Limiter) -> None:
        super().__init__(f"{limiter.kind} limiter {limiter.name!r} over its limit")
        self.limiter = limiter


class LimiterError(ValueError):
    """A limiter was built with a name or an option it cannot have."""


@dataclass
class Defaults:
    """What ``configure()`` sets: the fallbacks of every limiter's job-side handling."""

    backoff: Backoff | None = None
    reschedule: int = DEFAULT_RESCHEDULE
    ttl: int = DEFAULT_TTL
    #: More exception classes treated as ``OverLimit`` when a job raises them (an API's own
    #: "429 Too Many Requests" error, say).
    errors: tuple[type[BaseException], ...] = ()


defaults = Defaults()


def configure(
    *,
    backoff: Backoff | None = None,
    reschedule: int | None = None,
    ttl: int | None = None,
    errors: Sequence[type[BaseException]] | None = None,
) -> None:
    """Change the defaults of every limiter (Sidekiq Enterprise's ``Limiter.configure``).

    ``backoff(limiter, payload, exc)`` returns the seconds until a rate-limited job runs
    again (``limiter`` is None for one of ``errors``); ``reschedule`` is how many times a
    job is rescheduled before it dies; ``ttl`` how long an unused limiter's keys live;
    ``errors`` more exception classes a job may raise to be handled as ``OverLimit``. An
    argument left out keeps its value.
    """
    if backoff is not None:
        if not callable(backoff):
            raise LimiterError(f"backoff must be callable, not {backoff!r}")
        defaults.backoff = backoff
    if reschedule is not None:
        defaults.reschedule = count_option("reschedule", reschedule, minimum=0)
    if ttl is not None:
        defaults.ttl = ttl_option(ttl)
    if errors is not None:
        classes = tuple(errors)
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise LimiterError(f"errors must be exception classes, not {cls!r}")
        defaults.errors = classes


# Option checks: a bad option fails where the limiter is built, naming the option. ------


def count_option(option: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LimiterError(f"{option} must be a whole number >= {minimum}, not {value!r}")
    return value


def seconds_option(option: str, value: Any, *, zero: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
        or value > 10 * 365 * 86_400
    ):
        bound = ">= 0" if zero else "> 0"
        raise LimiterError(f"{option} must be seconds {bound} (at most ten years), not {value!r}")
    return float(value)


def interval_option(option: str, value: Any, *, numbers: bool) -> float:
    """``"second" | "minute" | "hour" | "day"``, or (``numbers``) seconds > 0."""
    if isinstance(value, str):
        if value in INTERVALS:
            return float(INTERVALS[value])
        raise LimiterError(f"{option} must be one of {', '.join(INTERVALS)}, not {value!r}")
    if not numbers:
        raise LimiterError(f"{option} must be one of {', '.join(INTERVALS)}, not {value!r}")
    return seconds_option(option, value)


def ttl_option(value: Any) -> int:
    """Whole seconds; below a day is raised to a day (a limiter must outlive a slow day)."""
    return max(MIN_TTL, count_option("ttl", value, minimum=0))


@dataclass(frozen=True)
class LimiterStatus:
    """A limiter's state as read now (nothing is changed by reading it).

    ``used``: slots held (concurrent), calls counted in this bucket or window, drops in the
    leaky bucket, points spent and not refilled yet. ``limit``: the most there can be (None
    for an unlimited limiter). ``reset_at``: epoch seconds when the state next eases (a
    holder's lock times out, the bucket turns, the oldest call leaves the window, the bucket
    drains or the points refill), None when nothing is waited for.
    """

    used: float
    limit: float | None
    reset_at: float | None

    @property
    def available(self) -> bool:
        return self.limit is None or self.used < self.limit


class Handle:
    """What ``with limiter.within_limit() as handle:`` gives; only points limiters use it."""

    def points_used(self, points: float) -> None:
        raise TypeError("points_used() is for points limiters only")


_NO_HANDLE = Handle()


@dataclass
class Decision:
    """One attempt's answer: admitted, or refused with how long until it could be (or None)."""

    admitted: bool
    wait: float | None
    registered: bool = False
    reset: bool = False


class Limiter:
    """A cluster-wide rate limiter. Build one with the constructors (``concurrent()``...)."""

    kind: ClassVar[str] = ""
    #: Refused calls that learn no wait (concurrent: a holder may leave any moment) poll,
    #: starting this often and backing off to ``MAX_POLL``.
    POLL: ClassVar[float] = 0.025
    MAX_POLL: ClassVar[float] = 0.2
    #: Whether a refused call polls even when told a wait (a holder may leave before it).
    POLLS: ClassVar[bool] = False

    def __init__(
        self,
        name: str,
        *,
        wait_timeout: float = 5,
        reschedule: int | None = None,
        backoff: Backoff | None = None,
        ttl: int | None = None,
        wurk: Wurk | None = None,
    ) -> None:
        if not isinstance(name, str) or not keys.NAME.match(name):
            raise LimiterError(
                f"a limiter name is 1 to 200 letters, digits and _-:.#@ characters, not {name!r}"
            )
        self.name = name
        self.wait_timeout = seconds_option("wait_timeout", wait_timeout, zero=True)
        self.reschedule = None if reschedule is None else count_option("reschedule", reschedule, minimum=0)
        if backoff is not None and not callable(backoff):
            raise LimiterError(f"backoff must be callable, not {backoff!r}")
        self.backoff = backoff
        self._ttl = None if ttl is None else ttl_option(ttl)
        self._wurk = wurk

    # Description -------------------------------------------------------------------

    @property
    def wurk(self) -> Wurk:
        return self._wurk or default_wurk

    @property
    def ttl(self) -> int:
        return self._ttl if self._ttl is not None else defaults.ttl

    @property
    def size(self) -> float:
        """The limiter's capacity: slots, calls per bucket or window, drops, points."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The options that define the limit, as stored in its metadata (``lmtr:<name>``)."""
        raise NotImplementedError

    def _described(self) -> tuple[str, str, str, str, int]:
        options = wire.dumps(self.options())
        fingerprint = hashlib.sha256(f"{self.kind}|{self.name}|{options}".encode()).hexdigest()
        return (self.name, self.kind, options, fingerprint, self.ttl)

    def _keys(self) -> list[str]:
        return [str(keys.meta(self.name)), keys.NAMES, keys.state(self.kind, self.name)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.options()}>"

    # Deciding ----------------------------------------------------------------------

    def _run(self, op: str, now: float | None, args: Sequence[Any]) -> list[Any]:
        return self.wurk.scripts.limiter(self._keys(), op, self._described(), now, args)

    def _decide(self, op: str, now: float | None, args: Sequence[Any]) -> Decision:
        reply = self._run(op, now, args)
        admitted, registered, reset, wait = int(reply[0]), int(reply[1]), int(reply[2]), reply[3]
        decision = Decision(bool(admitted), float(wait) if wait else None, bool(registered), bool(reset))
        if decision.reset:
            logger.warning("limiter %r: one of its keys held another type of data; started afresh", self.name)
        if decision.registered:
            names.after_register(self.wurk)
        return decision

    def attempt(self, now: float | None = None) -> Decision:
        """One try, no waiting. ``now`` (epoch seconds) replaces the server's clock: for tests."""
        raise NotImplementedError

    def _admit(self, attempt: Callable[[bool], Decision]) -> None:
        """Try until admitted, waiting up to ``wait_timeout``; raise ``OverLimit`` past it."""
        deadline = time.monotonic() + self.wait_timeout
        poll = self.POLL
        first = True
        while True:
            decision = attempt(first)
            if decision.admitted:
                return
            first = False
            remaining = deadline - time.monotonic()
            if decision.wait is None or self.POLLS:
                pause = min(poll, remaining)
                poll = min(poll * 1.5, self.MAX_POLL)
            else:
                # The server said when: sleep to then (a hair after), unless that is too late.
                pause = decision.wait + 0.002
                if pause > remaining:
                    pause = -1.0
            if pause <= 0:
                self._over_limit()
                raise OverLimit(self)
            time.sleep(pause)

    def _over_limit(self) -> None:
        """Called once when a call gives up (concurrent limiters count it)."""

    @contextmanager
    def within_limit(self) -> Iterator[Handle]:
        """Run the block within the limit: ``with limiter.within_limit(): ...``.

        Waits up to ``wait_timeout`` seconds for the limit to allow the call; raises
        ``OverLimit`` (and the block does not run) when it does not.
        """
        self._admit(lambda first: self.attempt())
        yield _NO_HANDLE

    # Reading and clearing ------------------------------------------------------------

    def _status_args(self) -> Sequence[Any]:
        return ()

    def status(self, now: float | None = None) -> LimiterStatus:
        """The state now; reads only (expired holders, old calls are not trimmed by a read).

        Raises ``LimiterStateError`` when the limiter's key holds another type of data.
        """
        reply = self._run("status", now, self._status_args())
        if reply and reply[0] == b"WRONGTYPE":
            raise LimiterStateError(
                f"limiter {self.name!r}: {keys.state(self.kind, self.name)} holds a "
                f"{reply[1].decode('utf-8', 'replace')}, not a limiter's state"
            )
        used = float(reply[0])
        reset_at = float(reply[1]) if reply[1] else None
        return LimiterStatus(used=used, limit=float(self.size), reset_at=reset_at)

    def reset(self) -> None:
        """Forget the limiter's state (held slots, counts): it starts empty. Its description stays."""
        self.wurk.redis.delete(*self._keys()[2:])

    def delete(self) -> None:
        """Remove every key of the limiter, its name from the list too."""
        redis = self.wurk.redis
        redis.delete(*self._keys()[2:], str(keys.meta(self.name)))
        redis.srem(keys.NAMES, self.name)


class LimiterStateError(RuntimeError):
    """A limiter's key holds data no limiter wrote (read by ``status()``)."""
