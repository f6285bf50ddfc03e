"""Redis connections: the process's pool, and one connection per thread for hot paths.

One blocking connection pool per process, sized for the worker threads plus the poller
and heartbeat. redis-py pools notice a fork (they compare pids) and drop inherited
sockets, so a forked child never shares a socket with its parent. The Lua scripts run
over either (``django_wurk.core.scripts``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, TypeAlias

import redis

from django_wurk.core.config import SENTINEL_SCHEME, Config
from django_wurk.core.sentinel import failover_aware, sentinel_pool

_hiredis_pack: Any
try:  # packing commands in C, as redis-py does with hiredis, without its per-argument pass
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is optional
    _hiredis_pack = None

#: redis-py's annotations type every reply as ``Awaitable | Any`` (one client class serves
#: sync and async), which checks nothing and forces casts everywhere; we treat replies as
#: ``Any`` and check the values where we decode them.
Redis: TypeAlias = Any


def connect(config: Config) -> Redis:
    """A client on a fresh pool for ``config.redis_url``; responses stay bytes.

    The one place a connection to Redis is made from settings: a ``redis+sentinel://`` URL
    gets a pool that follows the master through failovers (``django_wurk.core.sentinel``).

    Bytes, not str: a payload with invalid UTF-8 must reach our decoder (and the dead set)
    intact rather than blow up inside redis-py, and removing an entry with LREM/ZREM needs
    the exact bytes that were stored.
    """
    # Blocking, like Sidekiq's connection_pool: a thread that finds every connection in use
    # waits (up to the socket timeout) for one to come back instead of failing at once, so a
    # burst of web threads reading the dashboard or the API queues up rather than erroring.
    options: dict[str, Any] = {
        "max_connections": config.pool_size,
        "timeout": config.redis_socket_timeout,
        "socket_timeout": config.redis_socket_timeout + config.fetch_timeout,
        "socket_connect_timeout": config.redis_socket_timeout,
        "health_check_interval": 30,
    }
    if config.redis_url.startswith(f"{SENTINEL_SCHEME}://"):
        return redis.Redis(connection_pool=sentinel_pool(config.redis_url, **options))
    pool = redis.BlockingConnectionPool.from_url(config.redis_url, **options)
    # A master demoted behind a fixed address (a failover that moves a DNS name or a virtual
    # IP) answers READONLY: an outage to ride out, not a job error, after which every
    # connection of the pool reconnects (see core/sentinel.py).
    pool.connection_class = failover_aware(pool.connection_class)
    return redis.Redis(connection_pool=pool)


#: Bumped in every forked child, so connections made before a fork are never reused after it
#: (comparing an int is free; asking the kernel for the pid on every command is not).
_fork_generation = 0


def _forked() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_forked)

#: A connection idle longer than this is probed before use (one ``select``): the server may
#: have closed it (a restart, an idle timeout). A busy connection is not, which keeps the
#: probe's system call off the per-job path.
IDLE_PROBE_AFTER = 1.0


class Line:
    """One connection for one thread, for the per-job and per-push hot paths.

    Going through the client for every command (pool checkout and release, each with a
    fork check that asks the kernel for the pid, a retry wrapper, instrumentation hooks)
    costs more CPU than a no-op job. A ``Line`` keeps one connection for its thread and
    sends commands on it directly. With ``pooled`` the connection comes from the client's
    pool (worker threads, which the pool is sized for); otherwise it is the thread's own,
    outside the pool, so any number of web threads can push without exhausting it. Errors
    surface as redis-py's exceptions; the next command reconnects.
    """

    def __init__(self, client: Redis, pooled: bool = True) -> None:
        self._pool = client.connection_pool
        self._pooled = pooled
        self._conn: Any = None
        self._generation = _fork_generation
        self._last_used = 0.0

    def _connection(self) -> Any:
        conn = self._conn
        if conn is None or self._generation != _fork_generation:
            if self._pooled:
                conn = self._pool.get_connection()
            else:
                conn = self._pool.connection_class(**self._pool.connection_kwargs)
            self._conn = conn
            self._generation = _fork_generation
        elif conn._sock is not None and time.monotonic() - self._last_used > IDLE_PROBE_AFTER:
            try:
                stale = conn.can_read()
            except (redis.exceptions.ConnectionError, OSError):
                stale = True
            if stale:  # closed by the server while idle: reconnect before sending
                conn.disconnect()
        return conn

    def close(self) -> None:
        """Give the connection back: to the pool when pooled, else close it.

        A worker thread that ends (a stopped worker in a long-lived process, a replaced
        processor) must return its pooled connection, or the pool shrinks by one each time
        until it refuses everyone with "Too many connections".
        """
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._pooled and self._generation == _fork_generation:
            self._pool.release(conn)
        else:
            conn.disconnect()

    def call(self, *args: Any) -> Any:
        conn = self._connection()
        try:
            conn.send_command(*args)
            reply = conn.read_response()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            conn.disconnect()
            raise
        self._last_used = time.monotonic()
        return reply

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send commands in one write and read every reply (raises the first error reply)."""
        conn = self._connection()
        try:
            conn.send_packed_command(_pack(conn, commands), check_health=False)
            replies: list[Any] = []
            error: Exception | None = None
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    error = error or exc
                    replies.append(exc)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            conn.disconnect()
            raise
        self._last_used = time.monotonic()
        if error is not None:
            raise error
        return replies


def _pack(conn: Any, commands: list[tuple[Any, ...]]) -> Any:
    """The commands in the Redis protocol, in one buffer (so one ``sendall``, as ``pipeline`` says).

    When redis-py packs with hiredis it hands each command to ``hiredis.pack_command`` after
    a Python pass over every argument (a bulk push's LPUSH has 1,000) that only converts
    ``bytearray``/``memoryview`` and splits a first argument holding a space; then it cuts
    the output into several buffers. The client's commands (``SADD``, ``LPUSH``, ``ZADD``,
    ``WAIT``) hold str, bytes and numbers, which hiredis packs the same way; anything else
    (hiredis refuses it with ``TypeError``), a spaced first argument, or redis-py packing
    without hiredis, goes through redis-py's own packing.
    """
    if (
        _hiredis_pack is not None
        and type(getattr(conn, "_command_packer", None)).__name__ == "HiredisRespSerializer"
    ):
        try:
            packed = [_hiredis_pack(command) for command in commands if " " not in command[0]]
        except TypeError:
            packed = []
        if len(packed) == len(commands):
            return [b"".join(packed)]
    # redis-py's packing leaves each large argument in a buffer of its own, and sending them
    # one by one costs a syscall each (a fetch acknowledging seven 10 KB jobs made eight).
    return [b"".join(conn.pack_commands(commands))]


class ThreadLines:
    """One unpooled ``Line`` per thread, for clients (pushes from web threads)."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._local = threading.local()

    def get(self) -> Line:
        line: Line | None = getattr(self._local, "line", None)
        if line is None:
            line = self._local.line = Line(self._client, pooled=False)
        return line
