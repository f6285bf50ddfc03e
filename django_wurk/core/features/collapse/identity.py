"""Which pushes are "the same job" for debounce and throttle, and the keys that say so.

By default the same class, queue and arguments (keyword arguments included; for a Rails
ActiveJob payload the wrapped job's class and arguments), as unique jobs count them, since
a job's arguments are what it does. A ``collapse_key`` replaces the queue and arguments:
pushes of one class with one key are one job whatever their arguments, so a debounce then
runs the last push's arguments. The digest is the hex sha256 of that identity's JSON; the
keys are the seed's layouts, ``debounce:<digest>`` and ``throttle:<digest>:<slot index>``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django_wurk.core import activejob, wire
from django_wurk.core.arguments import KWARGS_KEY
from django_wurk.core.features.collapse.options import COLLAPSE_KEY
from django_wurk.core.wire import Payload

DEBOUNCE_PREFIX = "debounce:"
THROTTLE_PREFIX = "throttle:"


def digest(payload: Payload) -> str:
    """The digest naming ``payload``'s burst or slot; ``wire.PayloadError`` if the identity
    cannot be encoded (the push itself then refuses the job, with the reason)."""
    own = payload.get(COLLAPSE_KEY)
    if isinstance(own, str) and own:
        identity: list[Any] = [payload.get("class"), "key", own]
    else:
        queue = payload.get("queue") or "default"
        data = activejob.job_data(payload)
        if data is not None:
            identity = [payload.get("class"), queue, data.get("job_class"), data.get("arguments")]
        else:
            identity = [payload.get("class"), queue, payload.get("args")]
            if payload.get(KWARGS_KEY):
                identity.append(payload[KWARGS_KEY])
    try:
        text = wire.dumps(identity)
    except RecursionError as exc:
        raise wire.UnencodableError("arguments nested too deep to be a job's") from exc
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def debounce_key(token: str) -> str:
    return DEBOUNCE_PREFIX + token


def throttle_prefix(token: str) -> str:
    """The throttle keys' common part; the script appends the slot's index."""
    return f"{THROTTLE_PREFIX}{token}:"
