"""The unique lock: which jobs are "the same", the key that says so, and who holds it.

Two pushes are the same job when they have the same class, queue and arguments (Sidekiq
Enterprise's rule; the jid and timestamps do not count). The lock key is
``unique:<digest of the JSON of [class, queue, args]>``, encoded as Ruby's
``JSON.generate`` would, so a Ruby process finds the same key. The digest is Sidekiq
Enterprise 8's by default, the base64 of its sha256 (Ent-Changes 8.0.0: "Unique locks are
now SHA256 ... base64 vs hex"); ``UNIQUE_DIGEST`` picks Enterprise 7's hex sha1, or the hex
sha256 django-wurk wrote before, for a fleet still holding locks of that layout; for a Rails ActiveJob
payload it is ``[wrapper class, queue, job_class, arguments]``, because the wrapped hash
also holds a fresh ``job_id`` and ``enqueued_at`` per push. A job called with keyword
arguments (the payload's ``kwargs``, which Sidekiq has no notion of) adds them as a fourth
element, ``[class, queue, args, kwargs]``, so ``f(user_id=1)`` and ``f(user_id=2)`` are two
jobs; a call without them keeps Sidekiq's three. The key holds the jid of the
job that owns it, so only that job can release it (compare-and-delete).

A payload that took a lock carries, as Sidekiq Enterprise's do, ``unique_token`` (the
digest, so whoever runs the job finds the key without recomputing it) and ``unlocks_at``
(when the lock expires, epoch seconds as a string). ``unlocks_at`` also marks a job that
was admitted already: pushed again by hand or by a Ruby client, it is not checked again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from django_wurk.core import activejob, wire
from django_wurk.core.arguments import KWARGS_KEY
from django_wurk.core.client import write_group
from django_wurk.core.engine import wurk as default_wurk
from django_wurk.core.features.unique.options import MAX_SECONDS
from django_wurk.core.features.unique.settings import UniqueSettings
from django_wurk.core.job import Setter
from django_wurk.core.scripts import Scripts
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job, JobFunction

logger = logging.getLogger("django_wurk.unique")

PREFIX = "unique:"
#: Payload keys written when a lock is taken (Sidekiq Enterprise's names).
TOKEN = "unique_token"
UNLOCKS_AT = "unlocks_at"
#: A digest of any layout we write or Sidekiq Enterprise wrote (hex sha1, hex sha256, base64
#: sha256 with its padding): anything else in ``unique_token`` names no lock of this feature.
_TOKEN = re.compile(r"\A(?:[0-9a-f]{40}|[0-9a-f]{64}|[A-Za-z0-9+/]{43}=)\Z")
#: ``UNIQUE_DIGEST``'s layouts: how the identity's JSON text becomes the key's digest.
ENTERPRISE8 = "enterprise8"
ENTERPRISE7 = "enterprise7"
SHA256HEX = "sha256hex"
#: A lock outlives no job by more than this (about 300 years): a job scheduled absurdly far
#: ahead still gets a TTL Redis accepts, instead of failing its push.
MAX_TTL = 10**10
#: The gate's key in a ``client.WriteGroup``'s memory.
GROUP_MEMORY = "unique"


def ruby_float(value: float) -> str:
    """A float as Ruby's ``Float#to_s`` writes it (and so ``JSON.generate``).

    Python's ``repr`` picks the same shortest digits and the same exponent form below
    1e-4 and from 1e16 on, but Ruby also writes a whole number of 16 digits in exponent
    form (``1.0e+15``, where Python writes ``1000000000000000.0``) and always gives the
    mantissa a fraction (``1.0e+20``, where Python writes ``1e+20``).
    """
    text = wire.dumps(value)  # refuses NaN and the infinities, as Ruby's JSON does
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}"
    whole, _, fraction = text.partition(".")
    digits = whole.lstrip("-")
    if len(digits) == 16 and fraction == "0":
        significant = digits.rstrip("0")
        return f"{whole[: len(whole) - 16]}{significant[0]}.{significant[1:] or '0'}e+15"
    return text


def ruby_json(value: Any) -> str:
    """``value`` as JSON text exactly as Ruby's ``JSON.generate`` writes it, for the digest.

    ``wire.dumps`` writes the same bytes but for some floats (``ruby_float``); a digest
    that differed there would be another lock key than a Ruby process computes.
    """
    if isinstance(value, float):
        return ruby_float(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join([ruby_json(item) for item in value]) + "]"
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return "{" + ",".join([wire.dumps(k) + ":" + ruby_json(v) for k, v in value.items()]) + "}"
    return wire.dumps(value)


def encode(text: str, style: str = ENTERPRISE8) -> str:
    """The digest of an identity's JSON text in ``style`` (``UNIQUE_DIGEST``'s layouts)."""
    data = text.encode("utf-8")
    if style == ENTERPRISE8:
        return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")
    if style == ENTERPRISE7:
        return hashlib.sha1(data, usedforsecurity=False).hexdigest()
    if style == SHA256HEX:
        return hashlib.sha256(data).hexdigest()
    raise ValueError(f"unknown unique digest layout {style!r}")


def digest(payload: Payload, style: str = ENTERPRISE8) -> str:
    """The digest (in ``style``) that makes ``payload``'s lock key (see the module docstring).

    Raises ``wire.PayloadError`` when the identity cannot be encoded as JSON.
    """
    queue = payload.get("queue") or "default"
    data = activejob.job_data(payload)
    if data is not None:
        identity: list[Any] = [payload["class"], queue, data.get("job_class"), data.get("arguments")]
    else:
        identity = [payload.get("class"), queue, payload.get("args")]
        if payload.get(KWARGS_KEY):
            identity.append(payload[KWARGS_KEY])
    try:
        text = ruby_json(identity)
    except RecursionError as exc:
        raise wire.UnencodableError("arguments nested too deep to be a job's") from exc
    return encode(text, style)


def key(token: str) -> str:
    return PREFIX + token


def lifetime(payload: Payload) -> int | float | None:
    """The payload's ``unique_for`` in seconds, or ``None``: not a unique job (absent,
    ``False``, ``0``), or a value no lock can be taken with (logged; the job goes on, unlocked)."""
    value = payload.get("unique_for")
    if value is None or value is False or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < MAX_SECONDS:
        logger.warning(
            "job %s (%s): unique_for %r is not seconds > 0; pushed without a unique lock",
            payload.get("jid"),
            payload.get("class"),
            value,
        )
        return None
    return value


def held_token(payload: Payload, style: str = ENTERPRISE8) -> str | None:
    """The digest of the lock this payload's job may hold, to release it, or ``None``.

    The payload's own ``unique_token`` when it is one; else, for a unique job without it
    (a producer that records no token), the digest computed from the payload. Anything
    else in ``unique_token`` is ignored with a warning: the job runs, and a lock it might
    hold expires on its own.
    """
    token = payload.get(TOKEN)
    if isinstance(token, str) and _TOKEN.match(token):
        return token
    if token is not None:
        logger.warning("job %s: unique_token %r names no lock; not releasing any", payload.get("jid"), token)
        return None
    unique_for = payload.get("unique_for")
    if unique_for is None or unique_for is False:
        return None
    try:
        return digest(payload, style)
    except wire.PayloadError:
        return None


class UniqueGate:
    """The push gate (``writer.PushGate``): one script call takes the locks of a group of jobs.

    A job whose lock another jid holds is dropped (``perform_async`` returns ``None`` when
    the push is immediate). A scheduled job's lock lasts ``unique_for`` plus the delay, so
    it holds from the push until the job has run and ``unique_for`` passed. Within a
    ``client.WriteGroup`` (a transaction's pushes at its commit, an outbox relay pass) only
    the first push of each lock asks for it, and the others are dropped: written one by one,
    the first could otherwise run and release its lock before the second is written.
    """

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, payloads: list[Payload], at: float | None) -> list[Payload]:
        now = time.time()
        delay = max(0.0, at - now) if at is not None else 0.0
        asked: list[tuple[Payload, str, int]] = []
        group = write_group()
        # Lock digest -> the jid that asked for it first, over the writes of one group.
        first: dict[str, str] | None = group.memory.setdefault(GROUP_MEMORY, {}) if group else None
        early: set[int] = set()
        for payload in payloads:
            if UNLOCKS_AT in payload:
                continue  # admitted before: a re-push of a job that already went through here
            if "unique_for" not in payload:
                continue  # most jobs: no call to ``lifetime`` on every push
            seconds = lifetime(payload)
            if seconds is None:
                continue
            try:
                token = digest(payload, self.wurk.config.section(UniqueSettings).unique_digest)
            except wire.PayloadError:
                continue  # the push itself will refuse it, with the reason
            if first is not None:
                jid = str(payload.get("jid"))
                owner = first.setdefault(token, jid)
                if owner != jid:
                    # Pushed earlier in this group: the lock may be released already (that job
                    # ran), but this is the duplicate the group's first push made it.
                    early.add(id(payload))
                    logger.info(
                        "Skipping enqueue of %s (jid %s), not unique: jid %s with lock %s was pushed "
                        "earlier in the same transaction",
                        payload.get("class"),
                        jid,
                        owner,
                        key(token),
                    )
                    continue
            asked.append((payload, token, min(max(1, math.ceil(seconds + delay)), MAX_TTL)))
        if early:
            payloads = [p for p in payloads if id(p) not in early]
        if not asked:
            return payloads
        # On this thread's own connection, as the push that follows.
        scripts = Scripts(self.wurk.lines.get().call)
        replies = scripts.lock_unique([(key(t), str(p.get("jid")), ttl) for p, t, ttl in asked])
        refused: set[int] = set()
        for (payload, token, ttl), reply in zip(asked, replies, strict=True):
            if isinstance(reply, bytes):
                refused.add(id(payload))
                logger.info(
                    "Skipping enqueue of %s (jid %s), not unique: lock %s held by jid %s",
                    payload.get("class"),
                    payload.get("jid"),
                    key(token),
                    reply.decode("utf-8", "replace"),
                )
                continue
            if reply == 3:
                logger.warning(
                    "%s is not a unique lock (another type of key); %s (jid %s) pushed without one",
                    key(token),
                    payload.get("class"),
                    payload.get("jid"),
                )
                continue
            payload[TOKEN] = token
            payload[UNLOCKS_AT] = repr(round(now + ttl, 3))
        if not refused:
            return payloads
        return [p for p in payloads if id(p) not in refused]


def release(wurk: Wurk, payload: Payload, when: str) -> None:
    """Release the lock ``payload``'s job holds (only if it still holds it).

    Never raises: the job's outcome stands whatever happens to its lock, and a lock that
    could not be released expires on its own.
    """
    token = held_token(payload, wurk.config.section(UniqueSettings).unique_digest)
    jid = payload.get("jid")
    if token is None or not isinstance(jid, str):
        return
    try:
        wurk.scripts.release_lease(key(token), jid)
    except Exception as exc:
        logger.warning("could not release unique lock %s of job %s %s: %s", key(token), jid, when, exc)


def lock_owner(
    job_class: type[Job] | JobFunction[Any, Any] | str,
    args: Sequence[Any],
    queue: str | None = None,
    wurk: Wurk | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> str | None:
    """The jid holding the unique lock of ``job_class`` with ``args`` and ``kwargs`` (on
    ``queue``), if any.

    ``job_class`` is a job class, a ``@job`` function or a class name (a Ruby job, say);
    ``queue`` defaults to the class's own. Advisory, as Sidekiq Enterprise's
    ``Unique.locked?``: the lock may be taken or released a moment later.
    """
    engine = wurk or default_wurk
    if isinstance(job_class, str):
        payload: Payload = {"class": job_class, "queue": queue or "default", "args": list(args)}
        if kwargs:
            payload[KWARGS_KEY] = dict(kwargs)
    else:
        cls = job_class if isinstance(job_class, type) else job_class.job_class
        payload = Setter(cls, {"queue": queue} if queue else {}).payload(args, kwargs)
    try:
        holder = engine.redis.get(key(digest(payload, engine.config.section(UniqueSettings).unique_digest)))
    except ResponseError:
        return None  # a key of another type: not a lock
    return holder.decode("utf-8", "replace") if isinstance(holder, bytes) else None
