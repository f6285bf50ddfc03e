"""The one Redis key of historical metrics, and the shape of its entries.

``history:metrics`` is a stream; each entry is one snapshot, its ID the server's clock in
milliseconds when the leader wrote it. Fields (all text): ``v`` (the format, ``1``),
``processed`` and ``failed`` (the fleet's running totals, ``stat:processed`` and
``stat:failed``), ``enqueued`` (every queue's jobs), ``scheduled``, ``retries``, ``dead``
(the sets' sizes), ``busy`` (jobs running), ``processes`` (worker processes alive),
``queues`` (JSON: ``[[name, size, latency seconds], ...]``, the ``MAX_QUEUES`` largest
queues, largest first) and ``leader`` (the identity of the process that wrote it).
"""

from __future__ import annotations

from django_wurk.core.keys import LEADER

#: The stream of snapshots.
STREAM = "history:metrics"
#: The entry format written now.
VERSION = "1"
#: Queues recorded per snapshot, the largest first: a fleet with thousands of queues must not
#: make each snapshot (and the stream) that large.
MAX_QUEUES = 100
#: Longer queue names are cut to this many characters (in the stream and when read).
MAX_NAME = 200
#: The count fields of a snapshot, in the order they are written.
COUNTS = ("processed", "failed", "enqueued", "scheduled", "retries", "dead", "busy", "processes")

__all__ = ["COUNTS", "LEADER", "MAX_NAME", "MAX_QUEUES", "STREAM", "VERSION"]
