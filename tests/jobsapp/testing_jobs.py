"""Jobs for ``tests/test_testing.py``: they record into memory (``calls``), never into Redis.

They are imported by that test module only (not autodiscovered), and their wire names are
prefixed ``testing.`` so they cannot clash with the jobs other tests define.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django_wurk import Job, job

#: (job name, what it saw) for every execution, in order.
calls: list[tuple[str, Any]] = []


@job(wire_name="testing.collect")
def collect(*args: Any) -> int:
    calls.append(("collect", list(args)))
    return len(args)


@job(wire_name="testing.other", queue="low")
def other(x: Any) -> str:
    calls.append(("other", x))
    return f"other:{x}"


@job(wire_name="testing.chain", queue="chains")
def chain(n: int) -> None:
    """Pushes itself again with ``n - 1`` until ``n`` reaches 0."""
    calls.append(("chain", n))
    if n > 0:
        chain.perform_async(n - 1)


@job(wire_name="testing.explode")
def explode(message: str) -> None:
    calls.append(("explode", message))
    raise RuntimeError(message)


class SeesPayload(Job):
    """Records the jid and payload the engine hands it, as a worker would."""

    wire_name = "testing.SeesPayload"
    queue = "payloads"
    retry = 3

    def perform(self, *args: Any) -> list[Any]:
        calls.append(("SeesPayload", {"jid": self.jid, "payload": dict(self.payload), "args": list(args)}))
        return list(args)


@job(wire_name="testing.async_collect")
async def async_collect(*args: Any) -> int:
    await asyncio.sleep(0)
    calls.append(("async_collect", list(args)))
    return len(args)


@job(wire_name="testing.async_explode")
async def async_explode(message: str) -> None:
    await asyncio.sleep(0)
    calls.append(("async_explode", message))
    raise RuntimeError(message)
