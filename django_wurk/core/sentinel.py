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
* Every connection follows the master, not only new ones. A Sentinel failover of a live
  master leaves it writable for seconds after the Sentinels name the new one (about ten
  with Redis 7: they demote it only once its INFO says it still thinks it is the master),
  and a connection open on it keeps writing there: pushes acknowledged and then wiped when
  it resyncs as a replica, a blocking fetch waiting where no job comes. So each pool has a
  ``MasterEpoch``, moved when the master address it discovers changes or a connection gets
  a failover reply; every connection of the pool (pooled, a thread's ``Line``, a blocking
  fetch's, a pipeline's, a script's, the heartbeat's) notes it when it connects and
  reconnects, asking the Sentinels again, before its first command after it moved. A
  thread per pool (``MasterWatcher``) asks the Sentinels every second and listens for
  their ``+switch-master`` announcement, so the epoch moves within moments of the
  Sentinels' decision, not at the next connect.
* One log line per failover, per pool: when the discovered master address changes, not for
  every connection that notices.
* The pool blocks when every connection is in use, like the plain pool (see ``connect``).

Pushes that reach the old master between its replica's promotion and the Sentinels'
announcement (about a second) are still lost with it; ``PUSH_WAIT_REPLICAS`` or
``min-replicas-to-write`` are the remedies for that window (docs/sentinel.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
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


def _still_master(exc: redis.exceptions.ResponseError) -> bool:
    """``NOREPLICAS``: a master refusing writes while its replicas are away, not a replica."""
    return "NOREPLICAS" in str(exc)


class MasterEpoch:
    """How many times a pool saw its master move; a connection older than the last move
    reconnects before its next command (see the module docstring)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def moved(self) -> None:
        # Not atomic, and need not be: two moves counted as one still change the count.
        self.count += 1


class FailoverErrors:
    """Mixed into a connection class: failover replies raise ``ConnectionError`` and disconnect,
    and a connection made before its pool's master moved reconnects before its next command."""

    #: The pool's, set on the class ``failover_aware`` makes for it.
    epoch: MasterEpoch
    #: ``epoch.count`` when this connection last connected.
    _epoch_seen = -1

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        if self._sock is None:  # type: ignore[attr-defined]
            # Noted before the server is chosen: a move during the choice is seen next time.
            self._epoch_seen = self.epoch.count
            self._find_server()
        return super().connect_check_health(*args, **kwargs)  # type: ignore[misc]

    def _find_server(self) -> None:
        """Where to connect: for a plain pool, the address it was given."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self._epoch_seen != self.epoch.count and self._sock is not None:  # type: ignore[attr-defined]
            self.disconnect()  # type: ignore[attr-defined]
        super().send_packed_command(command, check_health)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.exceptions.ResponseError as exc:
            if not is_failover_reply(exc):
                raise
            if not _still_master(exc):
                self.epoch.moved()  # the pool's other connections are on this replica too
            self.disconnect()  # type: ignore[attr-defined]
            raise redis.exceptions.ConnectionError(f"the server is no longer the master: {exc}") from exc


_failover_classes: dict[type, type] = {}


def failover_aware(connection_class: type, epoch: MasterEpoch | None = None) -> type:
    """``connection_class`` with ``FailoverErrors`` mixed in, for one pool: its own ``epoch``
    (a new one if not given), shared by every connection the pool or its ``Line``s make."""
    mixed = connection_class
    if not issubclass(connection_class, FailoverErrors):
        mixed = _failover_classes.get(connection_class)  # type: ignore[assignment]
        if mixed is None:
            name = f"FailoverAware{connection_class.__name__}"
            mixed = _failover_classes[connection_class] = type(name, (FailoverErrors, connection_class), {})
    return type(mixed.__name__, (mixed,), {"epoch": epoch or MasterEpoch()})


class SentinelLine(FailoverErrors, SentinelManagedConnection):
    """A Sentinel-managed connection that asks the Sentinels whichever way it (re)connects.

    redis-py discovers the master only in ``connect()``, which its pool calls; a connection
    that reconnects by itself on its next command (a ``Line``'s, after a dropped socket or a
    move of the master) goes through ``connect_check_health`` and would dial the address it
    had before: the old master, or ``localhost:6379`` for a connection made outside the pool.
    """

    def _find_server(self) -> None:
        pool = self.connection_pool
        pool.watch()
        self.host, self.port = pool.get_master_address()


class MasterWatch(SentinelConnectionPoolProxy):
    """The pool's master discovery: logs each change of master once, and moves the epoch."""

    def __init__(self, *args: Any, epoch: MasterEpoch, **kwargs: Any) -> None:
        self._watch_lock = threading.Lock()
        self._known: Any = None
        self.epoch = epoch
        self._watcher: MasterWatcher | None = None
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]

    def get_master_address(self) -> Any:
        address = super().get_master_address()  # type: ignore[no-untyped-call]
        with self._watch_lock:
            before, self._known = self._known, address
        if before is not None and before != address:
            self.epoch.moved()
            logger.warning(
                "Sentinel failover of %r: the master moved from %s:%s to %s:%s",
                self.service_name,
                *before,
                *address,
            )
        return address

    def watch(self) -> None:
        """Make sure this process has a thread watching the Sentinels for this pool."""
        watcher = self._watcher
        if watcher is not None and watcher.pid == os.getpid() and watcher.is_alive():
            return
        with self._watch_lock:
            watcher = self._watcher
            if watcher is None or watcher.pid != os.getpid() or not watcher.is_alive():
                self._watcher = MasterWatcher(self)
                self._watcher.start()

    def stop_watching(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop.set()


#: Seconds between two questions to the Sentinels, when none announced a switch before.
WATCH_EVERY = 1.0


class MasterWatcher(threading.Thread):
    """Asks the Sentinels for the master every ``WATCH_EVERY`` seconds, and at once when one
    announces ``+switch-master``; a change moves the pool's epoch (``MasterWatch``).

    It holds its pool weakly and ends with it (or with ``stop``); a forked child starts its
    own at its first connect.
    """

    def __init__(self, proxy: MasterWatch) -> None:
        super().__init__(name=f"wurk-sentinel-{proxy.service_name}", daemon=True)
        self.proxy = weakref.ref(proxy)
        self.sentinels: list[Any] = list(proxy.sentinel_manager.sentinels)
        self.pid = os.getpid()
        self.stop = threading.Event()

    def run(self) -> None:
        listening: Any = None
        turn = 0
        try:
            while not self.stop.is_set():
                proxy = self.proxy()
                if proxy is None:
                    return
                with contextlib.suppress(redis.exceptions.RedisError):
                    proxy.get_master_address()
                del proxy
                if listening is None:
                    listening = self._listen(turn)
                    turn += 1
                if listening is None:
                    self.stop.wait(WATCH_EVERY)
                    continue
                try:
                    # Any message (an announcement) or none within the period: ask again.
                    listening.get_message(ignore_subscribe_messages=True, timeout=WATCH_EVERY)
                except (redis.exceptions.RedisError, OSError):
                    self._close(listening)
                    listening = None
        finally:
            self._close(listening)

    def _listen(self, turn: int) -> Any:
        """A subscription to ``+switch-master`` on one Sentinel (the next one each time)."""
        if not self.sentinels:
            return None
        sentinel = self.sentinels[turn % len(self.sentinels)]
        listening = sentinel.pubsub()
        try:
            listening.subscribe("+switch-master")
        except (redis.exceptions.RedisError, OSError):
            self._close(listening)
            return None
        return listening

    @staticmethod
    def _close(listening: Any) -> None:
        if listening is not None:
            with contextlib.suppress(Exception):
                listening.close()


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """A Sentinel-managed pool that waits for a free connection rather than failing at once."""

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        epoch = MasterEpoch()
        kwargs["connection_class"] = failover_aware(kwargs.get("connection_class", SentinelLine), epoch)
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
        self.proxy = MasterWatch(
            connection_pool=self,
            is_master=True,
            check_connection=self.check_connection,
            service_name=service_name,
            sentinel_manager=sentinel_manager,
            epoch=epoch,
        )
        self.connection_kwargs["connection_pool"] = self.proxy

    def disconnect(self, inuse_connections: bool = True) -> None:
        """Closing the whole pool (not only its idle connections) stops its watcher too."""
        if inuse_connections and isinstance(self.proxy, MasterWatch):
            self.proxy.stop_watching()
        super().disconnect(inuse_connections)


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
