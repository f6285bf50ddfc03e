"""Every Redis key a rate limiter uses, named here and in ``core/lua/limiter.lua``.

``lmtr:<name>`` describes a limiter (type, options, fingerprint) and ``lmtr-list`` names
every limiter whose description exists, so the data API and the dashboard can list them.
Each kind keeps its state in one key of its own; every key has a TTL (the limiter's
``ttl``, or two intervals for a bucket, the window for a window), so a limiter nobody
uses leaves nothing behind, and its name is swept out of ``lmtr-list`` afterwards.
"""

from __future__ import annotations

import re

#: The set of registered limiter names.
NAMES = "lmtr-list"

#: A limiter name: letters, digits and ``_ - : . # @`` (names are built into key names,
#: and per-tenant names such as ``stripe-42`` or ``erp:acme`` are intended).
NAME = re.compile(r"\A[\w\-:.#@]{1,200}\Z", re.ASCII)

#: Where each kind keeps its state.
STATE_PREFIX = {
    "concurrent": "lmtr-cs:",
    "bucket": "lmtr-b:",
    "window": "lmtr-w:",
    "leaky": "lmtr-l:",
    "points": "lmtr-p:",
}


def meta(name: str | bytes) -> str | bytes:
    """The limiter's description (HASH ``type, options, fingerprint, name``)."""
    return b"lmtr:" + name if isinstance(name, bytes) else f"lmtr:{name}"


def state(kind: str, name: str) -> str:
    return f"{STATE_PREFIX[kind]}{name}"


def stats(name: str) -> str:
    """A concurrent limiter's counters (HASH ``held, immediate, waited, reclaimed, overages,
    held_time``)."""
    return f"lmtr-stats:{name}"
