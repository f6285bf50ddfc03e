"""Redis connections and the Lua scripts we run on them.

One ``redis.ConnectionPool`` per process, sized for the worker threads plus the poller
and heartbeat. redis-py pools notice a fork (they compare pids) and drop inherited
sockets, so a forked child never shares a socket with its parent.

Each Lua script lives in ``django_wurk/lua/<name>.lua`` and is registered once per
client; redis-py's ``Script`` sends EVALSHA and falls back to loading the script on
NOSCRIPT, which also covers a server restarted underneath us.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, TypeAlias

import redis

from django_wurk.config import Config

#: redis-py's annotations type every reply as ``Awaitable | Any`` (one client class serves
#: sync and async), which checks nothing and forces casts everywhere; we treat replies as
#: ``Any`` and check the values where we decode them.
Redis: TypeAlias = Any


def connect(config: Config) -> Redis:
    """A client on a fresh pool for ``config.redis_url``; responses stay bytes.

    Bytes, not str: a payload with invalid UTF-8 must reach our decoder (and the dead set)
    intact rather than blow up inside redis-py, and removing an entry with LREM/ZREM needs
    the exact bytes that were stored.
    """
    pool = redis.ConnectionPool.from_url(
        config.redis_url,
        max_connections=config.pool_size,
        socket_timeout=config.redis_socket_timeout + config.fetch_timeout,
        socket_connect_timeout=config.redis_socket_timeout,
        health_check_interval=30,
    )
    return redis.Redis(connection_pool=pool)


@cache
def script_source(name: str) -> str:
    return resources.files("django_wurk").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


class Line:
    """One connection held by one thread, for the per-job hot path.

    A processor thread talks to Redis once or twice per job; going through the client
    each time (pool checkout and release, fork check, retry wrapper, instrumentation hooks)
    costs more CPU than the job. A ``Line`` keeps one pooled connection for the thread's
    life and sends commands on it directly. Errors surface as redis-py's exceptions; the
    connection reconnects on the next command after a failure.
    """

    def __init__(self, client: Redis) -> None:
        self._pool = client.connection_pool
        self._conn: Any = None

    def call(self, *args: Any) -> Any:
        # A Line belongs to one thread of one process (fetchers are built after any fork).
        conn = self._conn
        if conn is None:
            conn = self._conn = self._pool.get_connection()
        if conn._sock is not None:
            # What the pool checks at every checkout: a socket with something to read while
            # idle was closed by the server (a restart, an idle timeout). Reconnect before
            # sending, so the command is never lost on a dead socket.
            try:
                stale = conn.can_read()
            except (redis.exceptions.ConnectionError, OSError):
                stale = True
            if stale:
                conn.disconnect()
        try:
            conn.send_command(*args)
            return conn.read_response()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            conn.disconnect()
            raise

    def evalsha(self, name: str, keys: list[Any], args: list[Any]) -> Any:
        """Run a registered script by hash, loading it once if the server does not know it."""
        sha = script_sha(name)
        try:
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.call("SCRIPT", "LOAD", script_source(name))
            return self.call("EVALSHA", sha, len(keys), *keys, *args)

    def close(self) -> None:
        if self._conn is not None:
            self._pool.release(self._conn)
            self._conn = None


@cache
def script_sha(name: str) -> str:
    import hashlib

    return hashlib.sha1(script_source(name).encode("utf-8")).hexdigest()


class Scripts:
    """The Lua scripts, bound to one client."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._scripts: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self._client.register_script(script_source(name))
            self._scripts[name] = script
        return script
