"""Jobs for ``tests/interop/test_failures.py``: failures that cross between Ruby and Python.

Imported by that test module only (not autodiscovered). ``InteropFail`` takes over the
Ruby class name ``Interop::Fail`` so Python can run retries of jobs that failed in Ruby;
what it does is chosen per first argument by the test through Redis
(``interop:mode:<arg>`` = ``fail`` or ``kill``; absent = succeed). Every run records its
arguments and the payload it was given in ``seen:<name>``.
"""

from __future__ import annotations

import json
from typing import Any

from django_wurk import Job, job, wurk


class PythonBoom(Exception):
    pass


def record(name: str, value: Any) -> None:
    wurk.redis.rpush(f"seen:{name}", json.dumps(value))


def seen(name: str) -> list[Any]:
    return [json.loads(x) for x in wurk.redis.lrange(f"seen:{name}", 0, -1)]


@job(backtrace=True)
def fails_in_python(tag: str) -> None:
    record("fails_in_python", {"tag": tag})
    raise ValueError(f"python boom {tag}")


class InteropFail(Job):
    wire_name = "Interop::Fail"
    queue = "ruby"
    retry = 3
    backtrace = True

    mode: str | None = None

    def perform(self, *args: Any) -> None:
        record("Interop::Fail", {"args": list(args), "payload": self.payload})
        mode = wurk.redis.get(f"interop:mode:{args[0]}")
        self.mode = mode.decode() if mode else None
        if self.mode:
            raise PythonBoom(f"python {self.mode} {args[0]}")

    def retry_in(self, count: int, exc: BaseException) -> str | None:
        return "kill" if self.mode == "kill" else None
