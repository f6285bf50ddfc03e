"""The collapse gate: debounce and throttle decided where new jobs are written.

A push gate (``writer.PushGate``), not client middleware, so a push made in a database
transaction is collapsed at its commit, and a push rolled back takes no slot and extends no
burst. Each decision is one Lua step on the server's clock (``core/lua/debounce.lua``,
``core/lua/throttle_slot.lua``), one round trip for all the collapsed jobs of a push, so
processes racing with one another, or with clocks that disagree, reach one answer.

* **Throttle**: the first push of a job in each slot is admitted and goes on through the
  writer as any push; the others are dropped, and the caller gets the holder's jid back
  (``writer.Collapsed``), not ``None``: the job that stands for its push.
* **Debounce**: the gate writes the job itself, into the schedule set, in the script that
  removes the burst's previous entry, and drops it from the write; the caller gets the
  burst's jid (the first push's): every push of a burst answers the jid that will run.

A payload the gate decided carries ``collapse_token`` (the digest), so a job pushed again
as it is (an outbox row relayed twice, a job moved by hand) is not collapsed a second time.
A payload whose options are not this feature's (another producer's) is written as a plain
job, with a warning, never dropped.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from django_wurk.core import wire
from django_wurk.core.features.collapse.identity import debounce_key, digest, throttle_prefix
from django_wurk.core.features.collapse.options import (
    DEBOUNCE,
    DEBOUNCE_MAX,
    MAX_SECONDS,
    THROTTLE,
)
from django_wurk.core.scripts import Scripts
from django_wurk.core.wire import Payload
from django_wurk.core.writer import Collapsed

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.collapse")

#: Written on a payload the gate decided: the digest of its burst or slot.
TOKEN = "collapse_token"
#: A jid the scripts can put in a JSON string as it is (every jid this engine makes is hex).
_JID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")


def duration(value: Any, zero: bool) -> float | None:
    """A payload's option as seconds, or ``None`` when it cannot be one (another producer's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not (value >= 0 if zero else value > 0) or not value < MAX_SECONDS:
        return None
    return float(value)


class CollapseGate:
    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payloads: list[Payload], at: float | None) -> list[Payload]:
        debounced: list[tuple[Payload, str, float, float, str]] = []
        throttled: list[tuple[Payload, str, float]] = []
        for payload in payloads:
            if DEBOUNCE not in payload and THROTTLE not in payload:
                continue  # most jobs: two lookups
            if TOKEN in payload:
                continue  # decided before: a re-push of a job that went through here
            chosen = self._read(payload)
            if chosen is None:
                continue
            if chosen[0] == DEBOUNCE:
                _, token, wait, max_wait = chosen
                body = self._body(payload, token)
                if body is not None:
                    debounced.append((payload, token, wait, max_wait, body))
            else:
                throttled.append((payload, chosen[1], chosen[2]))
        if not debounced and not throttled:
            return payloads
        # On this thread's own connection, as the write that follows.
        scripts = Scripts(self.wurk.lines.get().call)
        instead: dict[str, str] = {}
        dropped: set[int] = set()
        if throttled:
            self._throttle(scripts, throttled, instead, dropped)
        if debounced:
            self._debounce(scripts, debounced, at, instead, dropped)
        return Collapsed([p for p in payloads if id(p) not in dropped], instead)

    def _read(self, payload: Payload) -> tuple[Any, ...] | None:
        """``(DEBOUNCE, digest, wait, max_wait)``, ``(THROTTLE, digest, slot)`` or None: a plain push."""
        jid = payload.get("jid")
        wait_given, slot_given = payload.get(DEBOUNCE), payload.get(THROTTLE)
        if wait_given is None and slot_given is None:
            return None  # turned off for this push: set(debounce=None)
        if not isinstance(jid, str) or not _JID.match(jid):
            self._plain(payload, f"its jid {jid!r} is not one this feature can keep")
            return None
        if payload.get("bid"):
            # A batch counts the jobs its flush writes; a job the gate wrote or dropped instead
            # would be counted by nobody, and the batch would never finish.
            self._plain(payload, "it belongs to a batch")
            return None
        try:
            token = digest(payload)
        except wire.PayloadError:
            return None  # the push itself refuses it, with the reason
        if wait_given is not None and slot_given is not None:
            self._plain(payload, f"it has both {DEBOUNCE} and {THROTTLE}")
            return None
        if wait_given is not None:
            wait = duration(wait_given, zero=True)
            max_given = payload.get(DEBOUNCE_MAX)
            max_wait = -1.0 if max_given is None else duration(max_given, zero=True)
            if wait is None or max_wait is None:
                self._plain(
                    payload, f"{DEBOUNCE} {wait_given!r} / {DEBOUNCE_MAX} {max_given!r} are not seconds"
                )
                return None
            return (DEBOUNCE, token, wait, max_wait)
        slot = duration(slot_given, zero=False)
        if slot is None:
            self._plain(payload, f"{THROTTLE} {slot_given!r} is not seconds > 0")
            return None
        return (THROTTLE, token, slot)

    def _plain(self, payload: Payload, why: str) -> None:
        logger.warning(
            "job %r (%s) pushed as a plain job, not collapsed: %s",
            payload.get("jid"),
            wire.job_display_class(payload),
            why,
        )

    def _body(self, payload: Payload, token: str) -> str | None:
        """The JSON the schedule entry gets, without its jid (the script puts the burst's
        first) and without the opening brace; None if the payload cannot be encoded."""
        entry = {k: v for k, v in payload.items() if k not in ("jid", "enqueued_at")}
        entry[TOKEN] = token
        try:
            text = wire.dumps(entry)
        except wire.PayloadError:
            return None  # written as a plain push, which refuses it with the reason
        return text[1:]

    def _throttle(
        self,
        scripts: Scripts,
        throttled: list[tuple[Payload, str, float]],
        instead: dict[str, str],
        dropped: set[int],
    ) -> None:
        replies = scripts.throttle([(throttle_prefix(t), str(p["jid"]), slot) for p, t, slot in throttled])
        for (payload, token, _), reply in zip(throttled, replies, strict=True):
            outcome, holder = int(reply[0]), _text(reply[1])
            if outcome == 0:
                dropped.add(id(payload))
                instead[str(payload["jid"])] = holder
                logger.info(
                    "Throttled %s (jid %s): slot %s held by jid %s",
                    wire.job_display_class(payload),
                    payload["jid"],
                    throttle_prefix(token),
                    holder,
                )
                continue
            if outcome == 2:
                logger.warning("%s held no jid; %s took its slot", throttle_prefix(token), payload["jid"])
            payload[TOKEN] = token

    def _debounce(
        self,
        scripts: Scripts,
        debounced: list[tuple[Payload, str, float, float, str]],
        at: float | None,
        instead: dict[str, str],
        dropped: set[int],
    ) -> None:
        replies = scripts.debounce(
            [(debounce_key(t), str(p["jid"]), w, m, at or 0.0, body) for p, t, w, m, body in debounced]
        )
        for (payload, token, _, _, _), reply in zip(debounced, replies, strict=True):
            jid, fire, outcome = _text(reply[0]), _text(reply[1]), int(reply[2])
            dropped.add(id(payload))
            instead[str(payload["jid"])] = jid
            if outcome == 2:
                logger.warning("%s was not a debounce burst; replaced by a new one", debounce_key(token))
            logger.debug(
                "Debounced %s (jid %s) into jid %s, firing at %s",
                wire.job_display_class(payload),
                payload["jid"],
                jid,
                fire,
            )


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
