"""The client's pipeline packs commands itself (``connection._pack``): exactly redis-py's bytes."""

from __future__ import annotations

from typing import Any

import redis

from django_wurk.core import connection


def _conn() -> Any:
    return redis.Redis().connection_pool.make_connection()


def test_packing_gives_redis_pys_bytes_for_the_clients_commands() -> None:
    conn = _conn()
    commands: list[tuple[Any, ...]] = [
        ("SADD", "queues", "default"),
        ("LPUSH", "queue:default", '{"args":["ünï ✓"]}', b"raw\x00bytes", "x" * 10_000),
        ("ZADD", "schedule", repr(1767225600.25), "{}", 3, 2.5),
        ("WAIT", 1, 50),
    ]
    assert b"".join(connection._pack(conn, commands)) == b"".join(conn.pack_commands(commands))


def test_anything_else_goes_through_redis_py() -> None:
    conn = _conn()
    for commands in (
        [("CLIENT SETNAME", "x")],  # a spaced first argument, which redis-py splits
        [("LPUSH", "q", bytearray(b"ba"))],  # hiredis refuses it, redis-py converts it
        [("LPUSH", "q", memoryview(b"mv"))],
    ):
        assert b"".join(connection._pack(conn, commands)) == b"".join(conn.pack_commands(commands))
