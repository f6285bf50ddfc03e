"""Fleet-wide queue caps (issue 26): ``WURK["QUEUE_CAPS"]`` holds a queue to at most N jobs at
once across every process, counted in the fetch's own Lua call; a dead process's slots come back."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core import keys
from django_wurk.core.config import Config, ConfigError, QueueSpec
from django_wurk.core.scripts import Scripts
from django_wurk.core.worker import Launcher
from tests.conftest import tail, wait_for
from tests.faults.conftest import spawn_worker  # noqa: F401  (the fixture)
from tests.jobsapp import jobs

CAPPED = keys.queue("capped")
HOLDERS = keys.cap_holders("capped")


# The setting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"capped": 0}, "at least 1"),
        ({"capped": "3"}, "integer"),
        ({"capped": True}, "integer"),
        ({"capped": 2.5}, "integer"),
        ({"no spaces": 3}, "queue name"),
        (["capped"], "dict"),
        ("{not json", "JSON"),
    ],
)
def test_a_bad_queue_caps_setting_fails_at_start_up_naming_it(raw: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        Config.from_mapping({"QUEUE_CAPS": raw})
    assert caught.value.setting == "QUEUE_CAPS"


def test_caps_need_reliable_fetch() -> None:
    with pytest.raises(ConfigError, match="reliable") as caught:
        Config.from_mapping({"QUEUE_CAPS": {"capped": 2}, "FETCH": "basic"})
    assert caught.value.setting == "QUEUE_CAPS"


def test_caps_are_read_from_settings_and_the_environment() -> None:
    assert Config.from_mapping({"QUEUE_CAPS": {"capped": 2}}).queue_caps == (("capped", 2),)
    assert Config.from_mapping({"QUEUE_CAPS": '{"capped": 3, "x": 1}'}).queue_caps == (
        ("capped", 3),
        ("x", 1),
    )


# The fetch script ------------------------------------------------------------------------


def fetch(scripts: Scripts, identity: str, cap: int, most: int = 8) -> list[Any] | None:
    private = keys.private_queue(identity, "capped")
    return scripts.fetch([CAPPED, private], (), most, 1, 1 << 30, [(0, cap, HOLDERS)])


def test_the_fetch_takes_no_more_than_the_free_slots_across_processes(wurk: Wurk, r: Any) -> None:
    r.lpush(CAPPED, *[json.dumps({"n": n}) for n in range(10)])
    scripts = wurk.scripts
    first = fetch(scripts, "host:1:a", cap=3)
    assert first is not None and int(first[1]) == 3  # eight asked for, three slots
    assert fetch(scripts, "host:2:b", cap=3) is None  # another process: the cap is reached
    r.lrem(keys.private_queue("host:1:a", "capped"), 1, first[2])  # one acknowledged: a slot is free
    second = fetch(scripts, "host:2:b", cap=3)
    assert second is not None and int(second[1]) == 1
    assert r.smembers(HOLDERS) == {
        keys.private_queue("host:1:a", "capped").encode(),
        keys.private_queue("host:2:b", "capped").encode(),
    }
    r.delete(keys.private_queue("host:1:a", "capped"))  # its jobs recovered, say: it holds none
    third = fetch(scripts, "host:2:b", cap=3)
    assert third is not None and int(third[1]) == 2
    assert r.smembers(HOLDERS) == {keys.private_queue("host:2:b", "capped").encode()}


def test_an_uncapped_queue_is_served_while_a_capped_one_is_full(wurk: Wurk, r: Any) -> None:
    r.lpush(CAPPED, "a", "b")
    r.lpush("queue:other", "c")
    fetch(wurk.scripts, "host:1:a", cap=2)
    sources = [CAPPED, keys.private_queue("host:2:b", "capped"), "queue:other", "queue:sq|host:2:b|other"]
    found = wurk.scripts.fetch(sources, (), 1, 1, 1 << 30, [(0, 2, HOLDERS)])
    assert found is not None and found[0] == b"queue:other" and found[2] == b"c"


def test_junk_in_the_holder_set_neither_counts_nor_stops_the_fetch(wurk: Wurk, r: Any) -> None:
    r.lpush(CAPPED, "a")
    r.hset("not-a-list", "x", "1")
    r.set("a-string", "x")
    r.sadd(HOLDERS, b"\xff\x00junk", "not-a-list", "a-string", "", "queue:sq|gone|capped")
    found = fetch(wurk.scripts, "host:1:a", cap=1)
    assert found is not None and found[2] == b"a"
    assert r.smembers(HOLDERS) == {keys.private_queue("host:1:a", "capped").encode()}
    assert r.type("not-a-list") == b"hash" and r.get("a-string") == b"x"  # other keys are left alone


def test_a_holder_set_of_another_type_leaves_the_queue_out_and_names_the_key(wurk: Wurk, r: Any) -> None:
    r.lpush(CAPPED, "a")
    r.set(HOLDERS, "user data")
    found = fetch(wurk.scripts, "host:1:a", cap=1)
    assert found == [b"", 0, CAPPED.encode(), HOLDERS.encode(), b"string"]
    assert r.llen(CAPPED) == 1 and r.get(HOLDERS) == b"user data"


def test_a_priority_list_shares_its_queues_slots(wurk: Wurk, r: Any) -> None:
    r.lpush("queue:capped@5", "high")
    r.lpush(CAPPED, "low")
    p5, p0 = keys.private_queue("host:1:a", "capped@5"), keys.private_queue("host:1:a", "capped")
    caps = [(0, 1, HOLDERS), (2, 1, HOLDERS)]
    found = wurk.scripts.fetch(["queue:capped@5", p5, CAPPED, p0], (), 8, 1, 1 << 30, caps)
    assert found is not None and found[2] == b"high"
    assert wurk.scripts.fetch(["queue:capped@5", p5, CAPPED, p0], (), 8, 1, 1 << 30, caps) is None


# Workers ---------------------------------------------------------------------------------


def test_a_worker_keeps_to_the_cap_and_still_serves_its_other_queues(
    wurk: Wurk, r: Any, test_config: Config
) -> None:
    wurk.configure(
        test_config.replace(
            concurrency=6, queues=(QueueSpec("capped"), QueueSpec("default")), queue_caps=(("capped", 2),)
        )
    )
    jobs.capped.perform_bulk([(n, 0.1) for n in range(12)])
    jobs.echo.perform_async("other")
    launcher = Launcher(wurk)
    launcher.start()
    try:
        wait_for(lambda: r.llen("seen:capped") == 12, timeout=30)
        assert r.lrange("seen:echo", 0, -1) == [b'["other"]']
    finally:
        launcher.stop()
    levels = [int(x) for x in r.lrange("caps:levels", 0, -1)]
    assert max(levels) <= 2, levels


@tail
def test_two_worker_processes_never_run_more_than_the_cap_at_once(
    wurk: Wurk,
    r: Any,
    spawn_worker: Callable[..., Any],  # noqa: F811
) -> None:
    env = {"WURK_QUEUES": "capped", "WURK_QUEUE_CAPS": '{"capped": 3}'}
    jobs.capped.perform_bulk([(n, 0.1) for n in range(40)])
    workers = [spawn_worker("-c", "4", **env), spawn_worker("-c", "4", **env)]
    wait_for(lambda: r.llen("seen:capped") == 40, timeout=120)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    levels = [int(x) for x in r.lrange("caps:levels", 0, -1)]
    assert len(levels) == 40 and max(levels) <= 3, levels
    for worker in workers:
        assert worker.wait(60) == 0


@tail
def test_the_slots_of_a_process_killed_mid_job_come_back(
    wurk: Wurk,
    r: Any,
    spawn_worker: Callable[..., Any],  # noqa: F811
) -> None:
    env = {"WURK_QUEUES": "capped", "WURK_QUEUE_CAPS": '{"capped": 2}'}
    doomed = spawn_worker("-c", "2", **env)
    jobs.capped.perform_bulk([(n, 0.0, "caps:go") for n in range(2)])  # run until caps:go exists
    wait_for(lambda: r.llen("caps:levels") == 2, timeout=60)
    held = [m for m in r.smembers(HOLDERS) if r.llen(m)]
    assert len(held) == 1 and sum(r.llen(m) for m in held) == 2
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(10)
    jobs.capped.perform_bulk([(n, 0.0) for n in range(2, 5)])
    r.set("caps:go", 1)
    survivor = spawn_worker("-c", "2", **env)
    # The dead process's two jobs hold both slots until the reaper gives them back to the
    # queue (its heartbeat is gone): then every job runs, the two recovered ones again.
    wait_for(lambda: {json.loads(x) for x in r.lrange("seen:capped", 0, -1)} == set(range(5)), timeout=90)
    assert held[0] not in r.smembers(HOLDERS) or r.llen(held[0]) == 0
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(60) == 0
