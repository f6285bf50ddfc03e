"""Reading the retry, schedule and dead sets: Sidekiq's entries, paging, scans, entry keys.

The data API (``django_wurk.core.api``) against a real server: everything is written to Redis
by hand (``tests/sidekiq_data.py``, as Ruby Sidekiq would have written it) and read back through
the API, so these tests check the keys and encodings as well as the Python logic.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.api import DeadSet, RetrySet, ScheduledSet, SortedEntry, parse_entry_key
from django_wurk.core import wire
from tests.sidekiq_data import DEAD_KILLED_SCORE, RETRY_SCORE, SCHEDULED_SCORE, payload, zadd
from tests.vectors import manifest, raw


def test_retry_set_reads_sidekiqs_retry_entry(wurk: Wurk, r: Any) -> None:
    data = raw("retry_job.json")
    score = manifest()["files"]["retry_job.json"]["score"]
    assert score == RETRY_SCORE
    r.zadd("retry", {data: score})
    rs = RetrySet(wurk)
    assert rs.size() == 1
    total, [entry] = rs.page()
    assert total == 1
    assert isinstance(entry, SortedEntry)
    assert entry.raw == data
    assert entry.job_class == "FailJob"
    assert entry.jid == "300194a3c6ab2a0c4e8ce1d7"
    assert entry.error_class == "AcceptanceError"
    assert entry.error_message == 'FailJob failed on purpose with args=["A"]'
    assert entry.get("retry_count") == 0
    assert entry.failed_at == 1795967145.0260332
    assert entry.retried_at is None
    assert entry.queue == "default" and entry.args == ["A"]
    assert entry.score == entry.at == RETRY_SCORE
    # The Web UI's address for it: Ruby's shortest float, a dash, the jid.
    assert entry.key == "1795967169.0260518-300194a3c6ab2a0c4e8ce1d7"
    found = rs.find("1795967169.0260518-300194a3c6ab2a0c4e8ce1d7")
    assert found is not None and found.raw == data
    assert rs.find_job("300194a3c6ab2a0c4e8ce1d7") is not None


def test_scheduled_set_reads_sidekiqs_scheduled_entry(wurk: Wurk, r: Any) -> None:
    data = raw("scheduled_job.json")
    score = manifest()["files"]["scheduled_job.json"]["score"]
    r.zadd("schedule", {data: score})
    [entry] = list(ScheduledSet(wurk))
    assert entry.jid == "dd266267bf1721905c20c954" and entry.args == ["later"]
    assert entry.enqueued_at is None  # a scheduled job carries none
    assert entry.created_at == 1795967143.705966
    assert entry.at == SCHEDULED_SCORE
    assert entry.key == f"{SCHEDULED_SCORE!r}-dd266267bf1721905c20c954"
    assert entry.latency > 0  # falls back to created_at


def test_dead_set_reads_sidekiqs_dead_entries_newest_first(wurk: Wurk, r: Any) -> None:
    killed = raw("dead_job_killed.json")
    exhausted = raw("dead_job_retries_exhausted.json")
    r.zadd("dead", {killed: DEAD_KILLED_SCORE, exhausted: 1795967145.0281432})
    total, entries = DeadSet(wurk).page(newest_first=True)
    assert total == 2
    assert [e.raw for e in entries] == [killed, exhausted]
    assert [e.jid for e in entries] == ["6d9c13e5977a3952d6e477bc", "377d35c31742ec2eafed938f"]
    assert [e.get("retry") for e in entries] == [True, 0]
    assert all(e.error_class == "AcceptanceError" and e.get("retry_count") == 0 for e in entries)
    assert entries[1].error_message == 'FailJob failed on purpose with args=["C"]'
    assert [e.jid for e in DeadSet(wurk).page()[1]] == list(reversed([e.jid for e in entries]))


def test_page_orders_by_score_either_way(wurk: Wurk, r: Any) -> None:
    for n in range(1, 6):
        zadd(r, "retry", payload(n), float(n))
    rs = RetrySet(wurk)
    total, oldest = rs.page(0, 3)
    assert total == 5 and [e.score for e in oldest] == [1.0, 2.0, 3.0]
    total, newest = rs.page(0, 3, newest_first=True)
    assert total == 5 and [e.score for e in newest] == [5.0, 4.0, 3.0]
    assert [e.args[0] for e in rs.page(3, 3, newest_first=True)[1]] == [2, 1]
    assert rs.page(5, 3) == (5, [])
    assert all(e.parent is rs for e in oldest)


def test_iterate_walks_past_the_first_hundred(wurk: Wurk, r: Any) -> None:
    r.zadd("schedule", {wire.dumps(payload(n)): 1000.0 + n for n in range(250)})
    ss = ScheduledSet(wurk)
    assert [e.args[0] for e in ss] == list(range(250))
    assert [e.args[0] for e in ss.iterate(newest_first=True)] == list(range(249, -1, -1))
    r.zremrangebyrank("schedule", 200, -1)
    assert len(list(ss)) == 200  # an exact multiple of the page size ends cleanly


def test_iterate_survives_deleting_each_entry_as_it_goes(wurk: Wurk, r: Any) -> None:
    """The docstring's promise: entries removed behind the cursor do not make it skip others."""
    r.zadd("retry", {wire.dumps(payload(n)): 1000.0 + n for n in range(250)})
    seen = []
    for entry in RetrySet(wurk).iterate():
        seen.append(entry.args[0])
        assert entry.delete() is True
    assert seen == list(range(250))
    assert r.zcard("retry") == 0


def test_scan_matches_literally_even_with_glob_characters(wurk: Wurk, r: Any) -> None:
    specials = ["a*b", "axxb", "[x]", "x", "what?", "whatt", "back\\slash", "grüße", "50%_off", "^caret$"]
    for i, text in enumerate(specials):
        zadd(r, "dead", payload(i, note=text), float(i))
    dead = DeadSet(wurk)

    def notes(match: str) -> list[str]:
        return sorted(e.get("note") for e in dead.scan(match))

    assert notes("a*b") == ["a*b"]
    assert notes("[x]") == ["[x]"]
    assert notes("what?") == ["what?"]
    assert notes("grüße") == ["grüße"]
    assert notes("50%_off") == ["50%_off"]
    assert notes("^caret$") == ["^caret$"]
    # The JSON text is searched: a backslash is stored escaped, as `\\`.
    assert notes("back\\\\slash") == ["back\\slash"]
    assert len(list(dead.scan(""))) == len(specials)
    assert list(dead.scan("no such text")) == []
    [entry] = dead.scan('"note":"x"')
    assert entry.score == 3.0 and entry.parent is dead


def test_scan_and_find_job_cover_a_large_set(wurk: Wurk, r: Any) -> None:
    r.zadd("retry", {wire.dumps(payload(n, note=f"item-{n}")): float(n) for n in range(700)})
    rs = RetrySet(wurk)
    hits = list(rs.scan("item-69"))  # item-69 and item-690..699
    assert sorted(e.args[0] for e in hits) == [69, *range(690, 700)]
    found = rs.find_job(f"{555:024x}")
    assert found is not None and found.score == 555.0
    assert rs.find_job("f" * 24) is None


def test_find_job_ignores_a_jid_that_only_appears_in_args(wurk: Wurk, r: Any) -> None:
    target = "abcdefabcdefabcdefabcdef"
    zadd(r, "retry", payload(1, other=target), 1.0)
    assert RetrySet(wurk).find_job(target) is None
    zadd(r, "retry", payload(2, jid=target), 2.0)
    found = RetrySet(wurk).find_job(target)
    assert found is not None and found.args == [2]


def test_fetch_returns_every_entry_at_a_score(wurk: Wurk, r: Any) -> None:
    zadd(r, "retry", payload(1), 5.5)
    zadd(r, "retry", payload(2), 5.5)
    zadd(r, "retry", payload(3), 5.6)
    rs = RetrySet(wurk)
    assert sorted(e.args[0] for e in rs.fetch(5.5)) == [1, 2]
    [only] = rs.fetch(5.5, f"{2:024x}")
    assert only.args == [2]
    assert rs.fetch(5.5, f"{3:024x}") == []
    assert rs.fetch(7.0) == []


@pytest.mark.parametrize("score", [RETRY_SCORE, 0.1 + 0.2, 1795966991.5853264, 1767225600.0, 12.0])
def test_find_addresses_an_entry_by_ruby_float_and_jid(wurk: Wurk, r: Any, score: float) -> None:
    zadd(r, "retry", payload(1), score)
    zadd(r, "retry", payload(2), score)  # shares the score: the jid picks one
    zadd(r, "retry", payload(3), score + 1)
    rs = RetrySet(wurk)
    key = f"{score!r}-{2:024x}"
    entry = rs.find(key)
    assert entry is not None and entry.args == [2] and entry.key == key
    assert rs.find(f"{score!r}-{3:024x}") is None  # right jid, wrong score
    assert rs.find(f"{score + 1!r}-{3:024x}") is not None


def test_find_on_a_vanished_entry_returns_none(wurk: Wurk, r: Any) -> None:
    member = zadd(r, "retry", payload(1), RETRY_SCORE)
    key = f"{RETRY_SCORE!r}-{1:024x}"
    assert RetrySet(wurk).find(key) is not None
    r.zrem("retry", member)
    assert RetrySet(wurk).find(key) is None
    assert RetrySet(wurk).delete(key) is False


@pytest.mark.parametrize("bad", ["", "1795967169.0260518", "1795967169.0260518-", "abc-def", "-jid"])
def test_malformed_entry_keys_are_refused(wurk: Wurk, bad: str) -> None:
    with pytest.raises(ValueError):
        RetrySet(wurk).find(bad)


def test_parse_entry_key_splits_at_the_first_dash() -> None:
    assert parse_entry_key("1795967169.0260518-300194a3c6ab2a0c4e8ce1d7") == (
        1795967169.0260518,
        "300194a3c6ab2a0c4e8ce1d7",
    )
    assert parse_entry_key("12.5-a-b") == (12.5, "a-b")
