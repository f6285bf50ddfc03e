"""Data written to Redis by hand, as Ruby Sidekiq writes it, for the data API tests.

The ``tests/test_api_*.py`` files write everything to Redis through these helpers (real
Sidekiq 6.4.1 bytes included) and read it back through the API, so they check the keys and
encodings as well as the Python logic.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from django_wurk.core import wire
from tests.vectors import raw

IDENTITY = "vm:11521:4704a400f737"
RETRY_SCORE = 1795967169.0260518
SCHEDULED_SCORE = 1796053543.7051623
DEAD_KILLED_SCORE = 1795967145.6376019
#: The bytes an API can never decode (not UTF-8, not JSON, not an object, no args).
UNREADABLE = [b"\xff\xfe{not utf-8", b"not json at all", b"[1,2,3]", b'{"class":"NoArgs"}']


def payload(n: int = 0, *, queue: str = "default", cls: str = "EchoJob", **extra: Any) -> dict[str, Any]:
    """A 6.4-style job with a recognisable jid (24 hex digits) and ``args == [n]``."""
    body: dict[str, Any] = {"retry": True, "queue": queue, "class": cls, "args": [n], "jid": f"{n:024x}"}
    body["created_at"] = 1795967144.5931814
    body.update(extra)
    return body


def zadd(r: Any, key: str, member: dict[str, Any] | bytes | str, score: float) -> bytes:
    """Store one sorted-set member; returns its exact bytes."""
    data = wire.dumps(member).encode() if isinstance(member, dict) else member
    data = data.encode() if isinstance(data, str) else data
    r.zadd(key, {data: score})
    return data


def lpush(r: Any, queue: str, *members: dict[str, Any] | bytes) -> list[bytes]:
    out = [m if isinstance(m, bytes) else wire.dumps(m).encode() for m in members]
    r.sadd("queues", queue)
    r.lpush(f"queue:{queue}", *out)
    return out


def queue_payloads(r: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(f"queue:{queue}", 0, -1)]


def bounded(fn: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Call ``fn`` in a thread and fail (rather than hang the suite) if it does not return."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} did not return within {timeout} s"
    if errors:
        raise errors[0]
    return result[0]


def write_process(
    r: Any,
    identity: str,
    info: dict[str, Any] | bytes,
    **fields: Any,
) -> None:
    """A heartbeat as §4 describes it: ``SADD processes`` + the ``<identity>`` hash."""
    r.sadd("processes", identity)
    raw_info = info if isinstance(info, bytes) else wire.dumps(info)
    r.hset(identity, mapping={"info": raw_info, **{k: str(v) for k, v in fields.items()}})
    r.expire(identity, 60)


def info_for(identity: str, **extra: Any) -> dict[str, Any]:
    host, pid, _ = identity.split(":")
    base: dict[str, Any] = {
        "hostname": host,
        "started_at": 1795967145.0219846,
        "pid": int(pid),
        "tag": "",
        "concurrency": 2,
        "queues": ["default"],
        "labels": [],
        "identity": identity,
    }
    base.update(extra)
    return base


def load_snapshot(r: Any) -> dict[str, Any]:
    """Recreate the database Ruby Sidekiq 6.4.1 left behind (redis_keys_snapshot.json)."""
    snapshot: dict[str, Any] = json.loads(raw("redis_keys_snapshot.json"))
    for key, item in snapshot.items():
        kind, value = item["type"], item["value"]
        if kind == "string":
            r.set(key, value)
        elif kind == "list":
            r.rpush(key, *value)
        elif kind == "set":
            r.sadd(key, *value)
        elif kind == "zset":
            r.zadd(key, {member: score for member, score in value})
        elif kind == "hash":
            r.hset(key, mapping=value)
        else:  # pragma: no cover - the snapshot holds only these types
            raise AssertionError(f"unexpected type {kind} for {key}")
    return snapshot


def inspect_example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw("inspect_example.json"))
    return data
