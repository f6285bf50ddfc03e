"""Capsules: several pools of job threads in one worker process, each with its own queues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

import pytest

from django_wurk import Wurk
from django_wurk.core.config import CapsuleSpec, Config, ConfigError, QueueSpec
from tests.conftest import wait_for
from tests.jobsapp import jobs
from tests.test_runwurk import identity_of, start, stop_later  # noqa: F401 (a fixture)

CAPSULES = ("--capsule", "default:3:default;low,2", "--capsule", "single:1:serial")


# Settings ------------------------------------------------------------------------------


def test_capsules_from_settings_give_the_total_and_the_union() -> None:
    config = Config.from_mapping(
        {
            "CAPSULES": {
                "default": {"queues": ["critical,2", "default"], "concurrency": 10},
                "single": {"queues": ["serial"], "concurrency": 1},
            }
        }
    )
    assert config.capsules == (
        CapsuleSpec("default", (QueueSpec("critical", 2), QueueSpec("default")), 10),
        CapsuleSpec("single", (QueueSpec("serial"),), 1),
    )
    assert config.concurrency == 11
    assert config.queue_names == ("critical", "default", "serial")
    single = config.for_capsule(config.capsules[1])
    assert (single.concurrency, single.queue_names, single.capsules) == (1, ("serial",), ())
    assert config.replace(timeout=1.0).capsules == config.capsules  # derived values are not a conflict


def test_the_text_form_of_the_environment_and_the_command_line() -> None:
    config = Config.from_mapping({"CAPSULES": "default:3:default;low,2 single:1:serial"})
    assert [(c.name, c.concurrency, c.queues) for c in config.capsule_list()] == [
        ("default", 3, (QueueSpec("default"), QueueSpec("low", 2))),
        ("single", 1, (QueueSpec("serial"),)),
    ]


def test_without_capsules_one_default_pool() -> None:
    config = Config(concurrency=4, queues=(QueueSpec("a"),))
    assert config.capsule_list() == (CapsuleSpec("default", (QueueSpec("a"),), 4),)
    assert config.for_capsule(config.capsule_list()[0]) is config


@pytest.mark.parametrize(
    ("values", "setting", "words"),
    [
        ({"CAPSULES": {"a": {"queues": ["x"]}, "b": {"queues": ["y", "x"]}}}, "CAPSULES", "one capsule"),
        ({"CAPSULES": {"a": {"queues": ["x"], "concurrency": 0}}}, "CAPSULES", "at least 1"),
        ({"CAPSULES": {"a": {"queues": []}}}, "CAPSULES", "non-empty list"),
        ({"CAPSULES": {"a": {"queues": ["x"], "threads": 2}}}, "CAPSULES", "unknown key"),
        ({"CAPSULES": {"bad name": {"queues": ["x"]}}}, "CAPSULES", "capsule name"),
        ({"CAPSULES": {"a": {"queues": ["bad queue!"]}}}, "CAPSULES", "queue name"),
        ({"CAPSULES": {"a": ["x"]}}, "CAPSULES", "must be a dict"),
        ({"CAPSULES": "nocolons"}, "CAPSULES", "cannot read"),
        ({"CAPSULES": 7}, "CAPSULES", "expected a dict"),
        ({"CAPSULES": "a:1:x a:2:y"}, "CAPSULES", "defined twice"),
        ({"CAPSULES": {"a": {"queues": ["x"]}}, "CONCURRENCY": 9}, "CONCURRENCY", "together with CAPSULES"),
        ({"CAPSULES": {"a": {"queues": ["x"]}}, "QUEUES": ["y"]}, "QUEUES", "together with CAPSULES"),
    ],
)
def test_bad_capsules_name_the_setting(values: dict[str, Any], setting: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_mapping(values)
    assert caught.value.setting == setting and words in str(caught.value)


def test_manage_py_check_names_the_setting(use_app_settings: Any) -> None:
    from django.test import override_settings

    from django_wurk.checks import check_settings

    with override_settings(WURK={"CAPSULES": {"a": {"queues": ["x"]}, "b": {"queues": ["x"]}}}):
        [error] = check_settings()
    assert "WURK['CAPSULES']" in error.msg and "'x'" in error.msg


# A real worker -------------------------------------------------------------------------


def test_two_capsules_in_one_process(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    proc = start(redis_url, *CAPSULES, "-t", "0.5")
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    info = json.loads(r.hget(identity, "info"))
    assert info["concurrency"] == 4 and r.hget(identity, "concurrency") == b"4"
    assert info["queues"] == ["default", "low", "serial"]
    assert info["capsules"] == {
        "default": {"concurrency": 3, "mode": "weighted", "weights": {"default": 0, "low": 2}},
        "single": {"concurrency": 1, "mode": "strict", "weights": {"serial": 0}},
    }
    assert info["weights"] == [{"default": 0, "low": 2}, {"serial": 0}]

    for _ in range(4):
        jobs.overlapping.set(queue="serial").perform_async("serial", 0.3)
    for _ in range(3):
        jobs.overlapping.set(queue="default").perform_async("pool", 1.0)
    wait_for(lambda: r.llen("seen:overlap-serial") == 4 and r.llen("seen:overlap-pool") == 3, timeout=30)
    # The single-threaded capsule ran its jobs strictly one at a time, while the other capsule's
    # three threads ran theirs together, beside it.
    assert [int(x) for x in r.lrange("seen:overlap-serial", 0, -1)] == [1, 1, 1, 1]
    assert max(int(x) for x in r.lrange("seen:overlap-pool", 0, -1)) == 3

    # TERM stops both capsules, each pushing back its own unfinished job to its own queue.
    serial_jid = jobs.sleepy.set(queue="serial").perform_async(60)
    default_jid = jobs.sleepy.set(queue="low").perform_async(60)
    wait_for(lambda: r.llen("seen:sleepy-start") == 2, timeout=15)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "pushed 2 unfinished job(s) back" in stderr
    assert [json.loads(x)["jid"] for x in r.lrange("queue:serial", 0, -1)] == [serial_jid]
    assert [json.loads(x)["jid"] for x in r.lrange("queue:low", 0, -1)] == [default_jid]
    assert not r.keys("queue:sq|*") and not r.sismember("processes", identity)


def test_kill_9_recovers_both_capsules_private_lists(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    proc = start(redis_url, *CAPSULES)
    stop_later.append(proc)
    identity = identity_of(r, proc.pid)
    serial_jid = jobs.sleepy.set(queue="serial").perform_async(60)
    default_jid = jobs.sleepy.set(queue="default").perform_async(60)
    wait_for(lambda: r.llen("seen:sleepy-start") == 2, timeout=15)
    # Each capsule fetched into its own private list, named by process and queue.
    assert r.llen(f"queue:sq|{identity}|serial") == 1 and r.llen(f"queue:sq|{identity}|default") == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    r.delete(identity)  # its hash would expire in 60 s: dead as far as the reaper is concerned

    # The next worker's start-up sweep gives both jobs back, and its capsules run them.
    r.delete("seen:sleepy-start")
    successor = start(redis_url, *CAPSULES, "-t", "0.5")
    stop_later.append(successor)
    wait_for(lambda: r.llen("seen:sleepy-start") == 2, timeout=30)
    assert not r.keys(f"queue:sq|{identity}|*")
    successor_id = identity_of(r, successor.pid)
    wait_for(lambda: len(r.hgetall(f"{successor_id}:work")) == 2, timeout=15)
    running = {
        json.loads(json.loads(v)["payload"])["jid"]: json.loads(v)["queue"]
        for v in r.hgetall(f"{successor_id}:work").values()
    }
    assert running == {serial_jid: "serial", default_jid: "default"}
    successor.send_signal(signal.SIGTERM)
    _, stderr = successor.communicate(timeout=30)
    assert successor.returncode == 0, stderr


def test_every_forked_process_runs_the_capsules(
    wurk: Wurk,
    r: Any,
    redis_url: str,
    stop_later: list[subprocess.Popen[str]],  # noqa: F811
) -> None:
    proc = start(redis_url, "-P", "2", *CAPSULES, "-t", "0.5")
    stop_later.append(proc)
    wait_for(lambda: r.scard("processes") == 2, timeout=60)
    for identity in r.smembers("processes"):
        info = json.loads(r.hget(identity, "info"))
        assert set(info["capsules"]) == {"default", "single"} and info["concurrency"] == 4
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    wait_for(lambda: r.scard("processes") == 0, timeout=15)
