"""The bad-data corpus against iterable jobs: junk where an iterable job keeps its cursor.

``it-<jid>`` is read when the job starts. Whatever it holds, the job must either resume from
a cursor it can read or fail with ``UnreadableIterationState`` naming the key (so it retries,
then lands in the dead set with the reason), never start over silently, never crash the
worker, and never be lost: each job leaves exactly one trace.

Its ``cancelled`` field is read at the start and with every save. Whatever bytes it holds,
the job is cancelled (Ruby's ``cancel!`` tests the field for truth, and every string is true
in Ruby): it stops, runs its cancel hooks, and is done, never failed or retried.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk import Wurk
from django_wurk.core.features.iterable import IterationState, UnreadableIterationState
from django_wurk.core.features.iterable.state import Saved
from django_wurk.core.worker.launcher import Launcher
from tests.conftest import wait_for
from tests.hostile.corpus import members
from tests.jobsapp import jobs


def test_every_corpus_value_as_a_cursor_reads_or_fails_by_name(wurk: Wurk, r: Any) -> None:
    for n, member in enumerate(members("iterable", time.time(), flavours=(True,), huge_mb=(1,))):
        jid = f"hostile{n}"
        r.hset(f"it-{jid}", mapping={"c": member.raw, "ex": member.raw[:20], "rt": "1.5"})
        try:
            IterationState(r, jid).load()
        except UnreadableIterationState as exc:
            assert f"it-{jid}" in str(exc)


def test_jobs_whose_state_is_junk_fail_once_each_and_the_worker_goes_on(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    junk = [b"\xff\xfe", b"{", b"NaN", b'"\\ud800"', b"[" * 200 + b"]" * 200]
    jids = [jobs.Walker.perform_in(3600, 3, 0) for _ in junk]
    for jid, value in zip(jids, junk, strict=True):
        r.hset(f"it-{jid}", "c", value)
    r.set(f"it-{jids[0]}", "a string, not a hash")
    good = jobs.Walker.perform_in(3600, 2, 0)
    for entry in r.zrange("schedule", 0, -1):  # due now: run them all together
        r.zadd("schedule", {entry: 0})
    wait_for(lambda: r.zcard("retry") == len(junk) and r.llen("seen:walker-done") == 1, timeout=30)
    retried = {json.loads(e)["jid"]: json.loads(e) for e in r.zrange("retry", 0, -1)}
    assert set(retried) == set(jids)
    for jid, entry in retried.items():
        assert entry["error_class"] == "UnreadableIterationState" and f"it-{jid}" in entry["error_message"]
        assert r.exists(f"it-{jid}")  # left for a person to look at, never rewritten
    assert [int(x) for x in r.lrange("seen:walker", 0, -1)] == [0, 1]  # only the good one ran
    assert not r.exists(f"it-{good}")


def test_every_corpus_value_in_the_cancelled_field_cancels_the_job(wurk: Wurk, r: Any) -> None:
    for n, member in enumerate(members("iterable-cancel", time.time(), flavours=(True,), huge_mb=(1,))):
        jid = f"hostile-cancel{n}"
        state = IterationState(r, jid)
        r.hset(f"it-{jid}", "cancelled", member.raw)
        assert state.cancelled() and state.save(Saved(cursor=1, executions=1)), member
        assert isinstance(state.cancel(), int)  # the first cancel stands; junk reads as 0
        job = jobs.Hooked()
        job.jid = jid
        job.perform(3, 0)  # not an error
        assert job.cancelled and not r.exists(f"it-{jid}"), member
    seen = [json.loads(x) for x in r.lrange("seen:hooked", 0, -1)]
    assert seen[:4] == [["resume", 0], "cancel", "stop", "complete"]
    assert not any(isinstance(e, int) for e in seen)  # no item ran


def test_jobs_whose_cancel_is_junk_are_cancelled_once_each_and_the_worker_goes_on(
    wurk: Wurk, r: Any, workers: Launcher
) -> None:
    junk = [b"", b"\xff\xfe", b"0", b"-1", b"NaN", b"x" * 100_000]
    jids = [jobs.Hooked.perform_in(3600, 3, 0) for _ in junk]
    for jid, value in zip(jids, junk, strict=True):
        r.hset(f"it-{jid}", "cancelled", value)
    good = jobs.Walker.perform_in(3600, 2, 0)
    for entry in r.zrange("schedule", 0, -1):  # due now: run them all together
        r.zadd("schedule", {entry: 0})
    events = lambda: [json.loads(x) for x in r.lrange("seen:hooked", 0, -1)]  # noqa: E731
    wait_for(lambda: events().count("complete") == len(junk) and r.llen("seen:walker-done") == 1, timeout=30)
    assert events().count("cancel") == len(junk) and not any(isinstance(e, int) for e in events())
    wait_for(lambda: not any(r.exists(f"it-{jid}") for jid in [*jids, good]))
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
