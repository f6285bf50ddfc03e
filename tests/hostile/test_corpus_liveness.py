"""The heartbeat's pulses (the writes between beats) among the corpus's junk.

The beats are 30 s apart here, so every write the workers make to their process hashes,
busy-work hashes and stat totals during the test is a pulse. Junk counters (``stat:processed``
holding ``"abc"``, a daily count holding ``"x"``), odd processes and remote signals no
dashboard sends must not stop a pulse from writing the process hash, nor crash its thread.
"""

from __future__ import annotations

import time
from typing import Any

from django_wurk import Config, Wurk
from django_wurk.core import keys, wire
from tests.hostile.conftest import SERVED, Fleet, poll_until, settle
from tests.hostile.corpus import Member, load_odd_processes_queues_and_stats, payload
from tests.hostile.ledger import LoopWatch, Snapshot, account, account_good, report
from tests.hostile.test_corpus import push_interleaved


def test_pulses_keep_writing_among_odd_processes_and_junk_counters(
    r: Any, wurk: Wurk, corpus_config: Config, fleet: Fleet, watch: LoopWatch
) -> None:
    wurk.configure(corpus_config.replace(heartbeat_interval=30.0))
    now = time.time()
    load_odd_processes_queues_and_stats(r, now)
    fleet.start(2)
    started = time.time()
    for identity in fleet.identities():
        r.lpush(keys.signals(identity), b"\xff\xfe", b"", b"KILL", b"s" * 10_000)
    items = []
    for i in range(30):
        marker = f"fails cleanly {i}@pulses"
        items.append(
            Member(marker, wire.dumps(payload(marker, True, now)).encode(), marker, runnable=True, fails=True)
        )
    placed, good = push_interleaved(r, items, now, "default")

    def pulsed() -> bool:
        beats = [r.hget(identity, "beat") for identity in fleet.identities()]
        return all(b is not None and float(b) > started for b in beats)

    label = "pulses"
    problems = settle(r, fleet, label)
    snap = Snapshot.take(r)
    problems += fleet.problems(label)
    # After the last job ended, a pulse wrote each process as idle, long before the next beat.
    if not poll_until(lambda: pulsed() and all(r.hget(i, "busy") == b"0" for i in fleet.identities()), 3.0):
        problems.append(f"{label}: a worker's process hash was not rewritten between beats")
    problems += fleet.stop(label)
    problems += account(placed, snap, SERVED, label)
    problems += account_good(good, snap, label)
    found = {label: problems, f"{label} (what the loops reported)": watch.problems(label)}
    assert r.get(keys.STAT_PROCESSED) == b"abc"  # junk is left for a person to repair
    assert not any(found.values()), report(found)
