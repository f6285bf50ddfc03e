"""Every Redis key a batch uses, named here and (with the same names) in ``core/lua/batch.lua``.

The layout is Sidekiq Pro's as far as it is public (``b-<bid>`` and ``b-<bid>-<suffix>``,
the ``batches`` and ``dead-batches`` indexes), so an operator who knows Pro recognises it.
Every key of a batch expires with it: the hash gets the batch's lifetime when it is
written, and each other key gets the hash's remaining lifetime where it is created
(``EXPIRE ... NX``), so no key outlives its batch or lives without a TTL.
"""

from __future__ import annotations

import re

#: Every batch by creation time (score: epoch seconds); trimmed by age and size on each add.
INDEX = "batches"
#: Batches holding dead jobs (score: the latest death); trimmed like ``batches``.
DEAD_INDEX = "dead-batches"

#: ``bid`` = URL-safe base64 of 10 random bytes (14 characters), as Sidekiq Pro makes them.
#: A bid given to ``Batch(bid=...)`` must look like one: it is built into key names and JSON.
BID = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")

#: The sub-keys of ``b-<bid>``: live jids, failing jids, dead jids, all children, children
#: not yet complete, children not yet succeeded, and the callbacks (a list of JSON entries).
SUFFIXES = ("jids", "failed", "died", "kids", "pkids", "ukids", "callbacks")


def batch(bid: str) -> str:
    """The batch's hash: description, counters, options, and the fired-at markers."""
    return f"b-{bid}"


def jids(bid: str) -> str:
    return f"b-{bid}-jids"


def failed(bid: str) -> str:
    return f"b-{bid}-failed"


def died(bid: str) -> str:
    return f"b-{bid}-died"


def kids(bid: str) -> str:
    return f"b-{bid}-kids"


def pending_kids(bid: str) -> str:
    return f"b-{bid}-pkids"


def unsucceeded_kids(bid: str) -> str:
    return f"b-{bid}-ukids"


def callbacks(bid: str) -> str:
    return f"b-{bid}-callbacks"
