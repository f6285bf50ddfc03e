"""The process-wide engine: configuration, Redis, job registry, middleware and handlers.

``wurk`` is the one instance every public API talks to. Its configuration is either given
with ``configure()`` (tests, scripts) or produced on first use by a loader the Django app
installs, so importing a ``jobs`` module never touches settings or the network.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django_wurk.core import activejob, coroutines, wire
from django_wurk.core.client import BufferedPusher, Client, Pusher, RedisPusher
from django_wurk.core.config import Config
from django_wurk.core.connection import Redis, ThreadLines, connect
from django_wurk.core.middleware import Chain
from django_wurk.core.registry import Registry, registry
from django_wurk.core.scripts import Scripts
from django_wurk.core.wire import Payload

logger = logging.getLogger("django_wurk")

ErrorHandler = Callable[[BaseException, dict[str, Any]], None]
DeathHandler = Callable[[Payload, BaseException], None]


class UnknownJobError(LookupError):
    """A payload names a class no job registered; it retries, so a deploy race heals itself."""


class Wurk:
    def __init__(self, job_registry: Registry = registry) -> None:
        self.registry = job_registry
        self.client_middleware = Chain()
        self.server_middleware = Chain()
        #: Called as ``handler(exc, context)`` for every failed execution and internal error.
        self.error_handlers: list[ErrorHandler] = []
        #: Called as ``handler(payload, exc)`` when a job dies or is discarded.
        self.death_handlers: list[DeathHandler] = []
        self._config: Config | None = None
        self._loader: Callable[[], Config] | None = None
        self._redis: Redis | None = None
        self._scripts: Scripts | None = None
        self._lines: ThreadLines | None = None
        self._lock = threading.RLock()
        self.client = Client(self)
        self.pusher: Pusher = BufferedPusher(self, RedisPusher(self))

    # Configuration -------------------------------------------------------------------

    @property
    def config(self) -> Config:
        config = self._config
        if config is None:
            with self._lock:
                if self._config is None:
                    self._config = self._loader() if self._loader else Config()
                config = self._config
        return config

    def configure(self, config: Config) -> None:
        """Use ``config`` from now on; existing connections are closed."""
        with self._lock:
            self._config = config
            self._drop_connections()

    def set_config_loader(self, loader: Callable[[], Config]) -> None:
        """Build the configuration lazily, on first use (the Django app installs one)."""
        with self._lock:
            self._loader = loader
            self._config = None
            self._drop_connections()

    def _drop_connections(self) -> None:
        if self._redis is not None:
            self._redis.connection_pool.disconnect()
        self._redis = None
        self._scripts = None
        self._lines = None

    @property
    def redis(self) -> Redis:
        client = self._redis
        if client is None:
            with self._lock:
                if self._redis is None:
                    self._redis = connect(self.config)
                    self._scripts = Scripts(self._redis.execute_command)
                    self._lines = ThreadLines(self._redis)
                client = self._redis
        return client

    @property
    def lines(self) -> ThreadLines:
        """Each thread's own connection, for pushes (see ``django_wurk.core.connection.Line``)."""
        self.redis  # noqa: B018 - connects on first use
        assert self._lines is not None
        return self._lines

    @property
    def scripts(self) -> Scripts:
        """The Lua scripts over the pool (see ``django_wurk.core.scripts``)."""
        self.redis  # noqa: B018 - connects on first use
        assert self._scripts is not None
        return self._scripts

    # Running jobs --------------------------------------------------------------------

    def execute(self, payload: Payload) -> Any:
        """Run a decoded payload now, in this thread; returns what its job returned."""
        return Execution(self, payload).run()

    def run_inline(self, payload: Payload) -> Any:
        """Run a job now in this thread, through the client and server chains.

        The JSON round trip makes an inline run see exactly what a worker would.
        """
        prepared = self.client.prepare(payload)
        if prepared is None:
            return None
        prepared["enqueued_at"] = wire.now_stamp(self.config.timestamps)
        return self.execute(wire.loads(wire.dumps(prepared)))

    def report_error(self, exc: BaseException, context: dict[str, Any]) -> None:
        """Tell every error handler; a handler that raises is logged, never propagated."""
        for handler in list(self.error_handlers):
            try:
                handler(exc, context)
            except Exception:
                logger.exception("error handler %r raised", handler)

    def report_death(self, payload: Payload, exc: BaseException) -> None:
        for handler in list(self.death_handlers):
            try:
                handler(payload, exc)
            except Exception:
                logger.exception("death handler %r raised", handler)


class Execution:
    """One run of one decoded payload: the only way any job is run (workers, inline, tests).

    It finds the registered class, makes a fresh instance, and calls ``perform`` inside the
    server middleware, seeing an ``async def`` perform (or any awaitable it returns) through
    to its end on this thread's loop, so middleware wraps the whole run and a coroutine is
    never mistaken for a finished job. ``job`` stays on the execution rather than being
    returned because a failed run needs it too: the retry handler asks that same instance
    for ``retry_in`` and ``retries_exhausted``.
    """

    __slots__ = ("job", "payload", "wurk")

    def __init__(self, wurk: Wurk, payload: Payload) -> None:
        self.wurk = wurk
        self.payload = payload
        #: The job instance, once its class is found (``None`` if that failed).
        self.job: Any = None

    def run(self) -> Any:
        wurk, payload = self.wurk, self.payload
        wrapped = payload["class"] in activejob.WRAPPERS
        job = self.job = self._job_class(wrapped)()
        job.jid = payload.get("jid", "")
        job.payload = payload
        args, kwargs = activejob.arguments(payload) if wrapped else (payload["args"], {})
        result: list[Any] = [None]

        def perform() -> None:
            value = job.perform(*args, **kwargs)
            # Most jobs return None: skip the awaitable checks for them, this is the hot path.
            result[0] = (
                value if value is None else coroutines.settle(value, f"{type(job).__qualname__}.perform")
            )

        wurk.server_middleware.invoke(perform, job, payload, payload.get("queue", "default"))
        return result[0]

    def _job_class(self, wrapped: bool) -> type[Any]:
        """The registered class; an ActiveJob wrapper resolves to the job it wraps."""
        name = self.payload["class"]
        if wrapped:
            name = activejob.job_name(self.payload) or name
        job_class = self.wurk.registry.resolve(name)
        if job_class is None:
            raise UnknownJobError(
                f"no job is registered as {name!r}; define it in an installed app's jobs module "
                "(payloads never choose what code to import)"
            )
        return job_class


wurk = Wurk()
