"""Following a master through Sentinel failovers, and telling a demoted master from a job error.

A ``redis+sentinel://`` URL names Sentinels and a service; the pool asks them for the master
whenever it opens a connection (redis-py's ``SentinelConnectionPool`` does the discovery),
so after a failover every reconnect lands on the new master. What this module adds:

* Failover errors become connection errors. During a failover the old master, still
  reachable, turns replica: a write gets ``READONLY`` (also from inside a Lua script), a
  blocked ``BLMOVE``/``BRPOP`` gets ``UNBLOCKED``, a replica cut off from its master may say
  ``MASTERDOWN``, and with ``min-replicas-to-write`` a master that lost its
  replica says ``NOREPLICAS``. The rest of the engine reads a ``ResponseError`` as "this data is wrong"
  (a key of the wrong type, a bad job) and a ``ConnectionError`` as "Redis is away, back off
  and retry": these replies are the second kind, so the connection is dropped and a
  ``ConnectionError`` raised, and the next command asks the Sentinels again. A job is never
  failed, buried or retried because its server changed role under it.
* One log line per failover, per pool: when the discovered master address changes, not for
  every connection that notices.
* The pool blocks when every connection is in use, like the plain pool (see ``connect``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis

# redis-py leaves its Sentinel classes unannotated, hence the no-untyped-call ignores below.
from redis.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelConnectionPoolProxy,
    SentinelManagedConnection,
)

from django_wurk.core.config import parse_sentinel_url

logger = logging.getLogger("django_wurk.redis")

#: Error codes that mean "this server is not (or no longer) the writable master" (redis-py
#: keeps the code in the message for these; READONLY it turns into ``ReadOnlyError``).
FAILOVER_REPLIES = ("READONLY", "UNBLOCKED", "MASTERDOWN", "NOREPLICAS")


def is_failover_reply(exc: redis.exceptions.ResponseError) -> bool:
    """True for a reply a demoted or cut-off server gives, also when raised inside a script."""
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return True
    text = str(exc)
    if text.startswith(FAILOVER_REPLIES):
        return True
    # A write inside a Lua script on a replica, on servers that wrap the script's error
    # ("ERR ... You can't write against a read only replica") instead of passing its code on.
    return "can't write against a read only replica" in text or "-NOREPLICAS" in text


class FailoverErrors:
    """Mixed into a connection class: failover replies raise ``ConnectionError`` and disconnect."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.exceptions.ResponseError as exc:
            if not is_failover_reply(exc):
                raise
            self.disconnect()  # type: ignore[attr-defined]
            raise redis.exceptions.ConnectionError(f"the server is no longer the master: {exc}") from exc


_failover_classes: dict[type, type] = {}


def failover_aware(connection_class: type) -> type:
    """``connection_class`` with ``FailoverErrors`` mixed in (one subclass per class, made once)."""
    made = _failover_classes.get(connection_class)
    if made is None:
        made = type(f"FailoverAware{connection_class.__name__}", (FailoverErrors, connection_class), {})
        _failover_classes[connection_class] = made
    return made


class SentinelLine(FailoverErrors, SentinelManagedConnection):
    """A Sentinel-managed connection that asks the Sentinels whichever way it (re)connects.

    redis-py discovers the master only in ``connect()``, which its pool calls; a connection
    that reconnects by itself on its next command (a ``Line``'s, after a dropped socket) goes
    through ``connect_check_health`` and would dial the address it had before: the old master,
    or ``localhost:6379`` for a connection made outside the pool.
    """

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        if self._sock is None:
            self.host, self.port = self.connection_pool.get_master_address()
        return super().connect_check_health(*args, **kwargs)


class MasterWatch(SentinelConnectionPoolProxy):
    """The pool's master discovery, logging each change of master once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._watch_lock = threading.Lock()
        self._known: Any = None
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]

    def get_master_address(self) -> Any:
        address = super().get_master_address()  # type: ignore[no-untyped-call]
        with self._watch_lock:
            before, self._known = self._known, address
        if before is not None and before != address:
            logger.warning(
                "Sentinel failover of %r: the master moved from %s:%s to %s:%s",
                self.service_name,
                *before,
                *address,
            )
        return address


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """A Sentinel-managed pool that waits for a free connection rather than failing at once."""

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
        self.proxy = MasterWatch(
            connection_pool=self,
            is_master=True,
            check_connection=self.check_connection,
            service_name=service_name,
            sentinel_manager=sentinel_manager,
        )
        self.connection_kwargs["connection_pool"] = self.proxy


def sentinel_pool(url: str, **options: Any) -> BlockingSentinelPool:
    """A pool on the master the Sentinels of ``url`` name; ``options`` as for a plain pool.

    The Sentinels get the socket timeouts but not the credentials (see ``SentinelUrl``).
    """
    where = parse_sentinel_url(url)
    sentinel_options = {key: value for key, value in options.items() if key.startswith("socket_")}
    manager = Sentinel(list(where.sentinels), sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
    return BlockingSentinelPool(
        where.service,
        manager,
        connection_class=SentinelLine,
        db=where.db,
        username=where.username,
        password=where.password,
        **options,
    )
