"""The bad-data corpus against what priorities and queue caps read in a loop (issue 26).

* Priority lists (``queue:<q>@<p>``): the processor fetches from them as from any queue, so
  every corpus member pushed there is run, buried or recorded exactly once, as in a queue.
* A capped queue's holder set (``wurk-cap-holders:<q>``): fetch.lua reads every member and the
  length of the key it names, on every fetch of the queue. Junk members (any bytes, keys of
  other types, keys that do not exist) must neither count against the cap nor stop the fetch.
* The ``queues`` set, from which workers learn the priority lists: names that only look like
  priority lists (``default@05``, ``default@\\xff``, ``default@1000``) are queues of their own.
"""

from __future__ import annotations

import time
from typing import Any

from django_wurk.core import keys, wire
from tests.hostile.conftest import SERVED, Fleet, poll_until
from tests.hostile.corpus import good_payload, members
from tests.hostile.ledger import LoopWatch, Placed, report
from tests.hostile.test_corpus import finish

#: The priority lists the corpus goes into: one above and one below each served queue's own list.
LISTS = ("default@7", "critical@-3")


def test_priority_lists_and_capped_queues_run_bury_or_record_every_member(
    r: Any, fleet: Fleet, watch: LoopWatch
) -> None:
    config = fleet.wurk.config
    fleet.wurk.configure(config.replace(queue_caps=tuple((q, 2) for q in SERVED)))
    now = time.time()
    items = members("priority", now)
    small = [m.raw for m in items if len(m.raw) < 4096][:60]  # as key names: read on every capped fetch
    junk = [*small, b"", b"\xff\xfe", b"queue:sq|gone|default", b"odd-hash", b"odd-string"]
    r.hset("odd-hash", "a", "1")
    r.set("odd-string", "x")
    for q in SERVED:
        r.sadd(keys.cap_holders(q), *junk)
    r.sadd(keys.QUEUES, *SERVED, *LISTS, b"default@05", b"default@\xff", b"default@1000", b"@5")
    placed: list[Placed] = []
    good: dict[str, str] = {}
    pipe = r.pipeline(transaction=False)
    for i, member in enumerate(items):
        queue = keys.queue(LISTS[i % len(LISTS)])
        pipe.lpush(queue, member.raw)
        placed.append(Placed(member, queue))
        job = good_payload(i, now, "default", tag="priority")
        job["priority"] = 7
        pipe.lpush(keys.queue("default@7"), wire.dumps(job))
        good[job["jid"]] = keys.queue("default@7")
    pipe.execute()
    fleet.start(2)
    # Workers learn the priority lists from the ``queues`` set within a couple of seconds.
    drained = poll_until(lambda: not any(r.llen(keys.queue(name)) for name in LISTS), 120.0, interval=0.2)
    problems = finish(r, fleet, watch, "priority lists", placed, good)
    if not drained:
        left = {name: r.llen(keys.queue(name)) for name in LISTS}
        problems["priority lists"].append(f"the priority lists were not drained: {left}")
    assert r.type("odd-hash") == b"hash" and r.get("odd-string") == b"x"  # named keys are left alone
    assert not any(problems.values()), report(problems)
