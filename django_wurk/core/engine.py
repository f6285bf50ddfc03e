"""The process-wide engine: configuration, Redis, job registry, middleware and handlers.

``wurk`` is the one instance every public API talks to. Its configuration is either given
with ``configure()`` (tests, scripts) or produced on first use by a loader the Django app
installs, so importing a ``jobs`` module never touches settings or the network.

Code outside this module changes the engine's state only through its public verbs:
``configure()``, ``set_config_loader()``, ``override()`` (a test's temporary engine) and
``reset()`` (no connection may cross a fork), so the locking and the order of the steps
live in one place.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django_wurk.core import activejob, arguments, coroutines, wire
from django_wurk.core.client import Client, Deferral, Pusher, capture, via_context
from django_wurk.core.config import Config
from django_wurk.core.connection import Redis, ThreadLines, connect
from django_wurk.core.control import JobExit, WorkerSignal
from django_wurk.core.events import Events
from django_wurk.core.feature import (
    Feature,
    FeatureOrderError,
    OptionCheck,
    OptionsCheck,
    Plug,
    order,
    unique_by_name,
)
from django_wurk.core.middleware import Chain
from django_wurk.core.registry import Registry, registry
from django_wurk.core.scripts import Scripts
from django_wurk.core.wire import Payload
from django_wurk.core.writer import PushGate, Writer

logger = logging.getLogger("django_wurk")


class ShardConnection:
    """One shard's Redis client, its scripts and its per-thread lines, made together."""

    __slots__ = ("lines", "redis", "scripts")

    def __init__(self, config: Config) -> None:
        self.redis: Redis = connect(config)
        self.scripts = Scripts(self.redis.execute_command)
        self.lines = ThreadLines(self.redis)


ErrorHandler = Callable[[BaseException, dict[str, Any]], None]
DeathHandler = Callable[[Payload, BaseException], None]


class UnknownJobError(LookupError):
    """A payload names a class no job registered; it retries, so a deploy race heals itself."""


class UnrunnableJob(Exception):
    """Raised while running a job whose payload can never run as it is (an encrypted argument
    no key opens): retrying would fail the same way, so the retry handler buries the job in
    the dead set at once, as it was fetched, with this message as the reason."""


#: The hooks of a ``Plug`` that land in the engine's lists.
HOOKS = ("gate", "on_error", "on_retry", "on_death")


def claim(
    table: dict[str, OptionCheck], other: dict[str, OptionCheck], name: str, check: OptionCheck, owner: str
) -> None:
    """Give option ``name`` to ``owner``'s check; two features may not both read one option,
    and none may take an option of Sidekiq's or a key the client writes."""
    if name in wire.KNOWN_OPTIONS or name in wire.RESERVED_KEYS or name == "shard":
        raise FeatureOrderError(f"the option {name!r} of feature {owner!r} is a job option or a payload key")
    if name in table or name in other:
        raise FeatureOrderError(f"the option {name!r} of feature {owner!r} is another feature's already")
    table[name] = check


class Wurk:
    """An engine: its configuration, connections, registry, and the features it is built from.

    ``Wurk(features=...)`` builds every chain and hook list from the features given
    (``core/feature.py``); ``use(...)`` adds more later (tracing, metrics, an application's
    own). The result depends on the features, not on the order they are given in.
    """

    def __init__(self, job_registry: Registry = registry, features: Iterable[Feature] = ()) -> None:
        self.registry = job_registry
        self.client_middleware = Chain()
        self.server_middleware = Chain()
        #: Called as ``handler(exc, context)`` for every failed execution and internal error.
        self.error_handlers: list[ErrorHandler] = []
        #: Called as ``handler(payload, exc)`` when a job dies or is discarded.
        self.death_handlers: list[DeathHandler] = []
        #: Called as ``handler(payload, exc)`` when a failed job is written to the retry set.
        self.retry_handlers: list[DeathHandler] = []
        #: Decide at the moment new jobs are written which may be (``writer.PushGate``).
        self.push_gates: list[PushGate] = []
        #: The process's lifecycle: ``wurk.events.on("startup", listener)`` (``core/events.py``).
        self.events = Events()
        #: The features this engine is built from, by name, and what each plugged in.
        self._features: dict[str, tuple[Feature, Plug]] = {}
        #: The options the features read, with their checks (``core/job.py`` asks here).
        self.job_options: dict[str, OptionCheck] = {}
        self.delivery_options: dict[str, OptionCheck] = {}
        #: The features' checks of a job's options together (``Feature.check_options``).
        self.options_checks: list[OptionsCheck] = []
        self._config: Config | None = None
        self._loader: Callable[[], Config] | None = None
        #: Each shard's connections, by shard name, made on first use.
        self._shards: dict[str, ShardConnection] = {}
        self._lock = threading.RLock()
        self.client = Client(self)
        #: The one writer of new jobs to Redis (``core/writer.py``).
        self.writer = Writer(self)
        #: Where pushes go: the writer, unless a testing mode put its own pusher here.
        self.pusher: Pusher = self.writer
        #: The host's rule for pushes made in its transactions (the Django app installs it).
        self.deferral: Deferral | None = None
        if features:
            self.use(*features)

    # Features ------------------------------------------------------------------------

    @property
    def features(self) -> tuple[Feature, ...]:
        """The features this engine is built from, by name."""
        return tuple(feature for feature, _ in sorted(self._features.values(), key=lambda fp: fp[0].name))

    def feature(self, name: str) -> Plug | None:
        """What the feature ``name`` plugged into this engine, if it is used."""
        found = self._features.get(name)
        return found[1] if found is not None else None

    def use(self, *features: Feature) -> None:
        """Build the engine with ``features`` too; one named like a feature already used
        replaces it. Every chain and hook list is composed again, in the order the
        features' places give (``core/feature.py``)."""
        with self._lock:
            unique_by_name(features)
            chosen = dict(self._features)
            for feature in features:
                known = chosen.get(feature.name)
                if known is None or known[0] is not feature:
                    chosen[feature.name] = (feature, feature.build(self))
            self._compose(chosen)

    def drop(self, *names: str) -> None:
        """Build the engine without the features ``names`` (a name not used is ignored)."""
        with self._lock:
            self._compose({name: fp for name, fp in self._features.items() if name not in names})

    def _compose(self, chosen: dict[str, tuple[Feature, Plug]]) -> None:
        features = [feature for feature, _ in chosen.values()]
        plugs = {name: plug for name, (_, plug) in chosen.items()}
        client = order(features, "client", lambda f: plugs[f.name].client is not None)
        server = order(features, "server", lambda f: plugs[f.name].server is not None)
        everyone = order(features, "server")
        job_options: dict[str, OptionCheck] = {}
        delivery_options: dict[str, OptionCheck] = {}
        for feature in everyone:
            for name, check in feature.job_options.items():
                claim(job_options, delivery_options, name, check, feature.name)
            for name, check in feature.delivery_options.items():
                claim(delivery_options, job_options, name, check, feature.name)
        old = [plug for _, plug in self._features.values()]

        def replace(hooks: list[Any], made: list[Any]) -> None:
            # The features' hooks first, in their order; an application's after them, as they were.
            before = {id(getattr(plug, attr)) for plug in old for attr in HOOKS}
            hooks[:] = made + [hook for hook in hooks if id(hook) not in before]

        self.client_middleware.compose([(f.name, plugs[f.name].client) for f in client])
        self.server_middleware.compose([(f.name, plugs[f.name].server) for f in server])
        replace(self.push_gates, [plugs[f.name].gate for f in everyone if plugs[f.name].gate is not None])
        # An outcome reaches the handlers as it reaches the middleware, innermost first: a
        # unique job's lock is released before batches push the callback its death fires.
        inward = everyone[::-1]
        replace(self.error_handlers, [p.on_error for f in inward if (p := plugs[f.name]).on_error])
        replace(self.retry_handlers, [p.on_retry for f in inward if (p := plugs[f.name]).on_retry])
        replace(self.death_handlers, [p.on_death for f in inward if (p := plugs[f.name]).on_death])
        for name in self._features:
            self.events.drop_owner(name)
        for feature in everyone:
            for event, listener in plugs[feature.name].events.items():
                self.events.on(event, listener, owner=feature.name)
        self.job_options, self.delivery_options = job_options, delivery_options
        self.options_checks = [f.check_options for f in everyone if f.check_options is not None]
        self._features = dict(chosen)

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
        """Use ``config`` from now on; existing connections are closed.

        A loader installed before is forgotten: the configuration was chosen, so ``reset()``
        must not replace it with one built from settings.
        """
        with self._lock:
            self._config = config
            self._loader = None
            self._drop_connections()

    def set_config_loader(self, loader: Callable[[], Config]) -> None:
        """Build the configuration lazily, on first use (the Django app installs one)."""
        with self._lock:
            self._loader = loader
            self._config = None
            self._drop_connections()

    def reset(self) -> None:
        """Close every connection, and forget a configuration the loader built.

        The next use connects again (and builds the configuration again, from the loader,
        so changed settings are read). Call it around a fork, since a parent and its child
        must never share a socket, or after changing what the loader reads. A configuration
        given with ``configure()`` is kept: there is nothing to rebuild it from.
        """
        with self._lock:
            if self._loader is not None:
                self._config = None
            self._drop_connections()

    @contextmanager
    def override(self, config: Config) -> Iterator[Wurk]:
        """Use ``config`` inside the block, then put the engine back as it was: for tests.

        The previous configuration (or loader) and its connections come back; connections
        opened inside are closed. Features used, middleware added and handlers appended inside
        the block are removed too (and push gates and event listeners), so one test's additions
        never run in the next.
        """
        with self._lock:
            saved = (self._config, self._loader, self._shards)
            # Set aside, not closed: they are the ones in use again after the block.
            self._shards = {}
            self._config, self._loader = config, None
        errors, deaths = list(self.error_handlers), list(self.death_handlers)
        retries = list(self.retry_handlers)
        gates = list(self.push_gates)
        events = self.events.snapshot()
        features = dict(self._features)
        options = (self.job_options, self.delivery_options, self.options_checks)
        try:
            with ExitStack() as stack:
                stack.enter_context(self.client_middleware.preserved())
                stack.enter_context(self.server_middleware.preserved())
                yield self
        finally:
            self.error_handlers[:] = errors
            self.death_handlers[:] = deaths
            self.retry_handlers[:] = retries
            self.push_gates[:] = gates
            self.events.restore(events)
            self._features = features
            self.job_options, self.delivery_options, self.options_checks = options
            with self._lock:
                self._drop_connections()
                self._config, self._loader, self._shards = saved

    def _drop_connections(self) -> None:
        for shard in self._shards.values():
            shard.redis.connection_pool.disconnect()
        self._shards = {}

    # Shards --------------------------------------------------------------------------

    @property
    def shard(self) -> str:
        """The shard this context talks to: a ``via()`` block's, else the process's (``SHARD``)."""
        return via_context.get() or self.config.shard

    @contextmanager
    def via(self, shard: str | None) -> Iterator[Wurk]:
        """Talk to shard ``shard`` inside the block (Sidekiq's ``Client.via``): pushes, unique
        locks, limiters, batches and reads all go to that shard's Redis. ``None`` changes
        nothing. Raises ``UnknownShard`` (a ``ValueError``) for a name ``SHARDS`` lacks."""
        if shard is None or shard == self.shard:
            yield self
            return
        self.config.shard_url(shard)  # an unknown name fails here, before anything runs
        token = via_context.set(shard)
        try:
            yield self
        finally:
            via_context.reset(token)

    def _connection(self) -> ShardConnection:
        name = via_context.get() or self.config.shard
        found = self._shards.get(name)
        if found is None:
            with self._lock:
                found = self._shards.get(name)
                if found is None:
                    found = self._shards[name] = ShardConnection(self.config.shard_config(name))
        return found

    @property
    def redis(self) -> Redis:
        """The current shard's client (see ``shard``)."""
        return self._connection().redis

    @property
    def lines(self) -> ThreadLines:
        """Each thread's own connection, for pushes (see ``django_wurk.core.connection.Line``)."""
        return self._connection().lines

    @property
    def scripts(self) -> Scripts:
        """The Lua scripts over the pool (see ``django_wurk.core.scripts``)."""
        return self._connection().scripts

    # Running jobs --------------------------------------------------------------------

    def execute(self, payload: Payload) -> Any:
        """Run a decoded payload now, in this thread; returns what its job returned."""
        return Execution(self, payload).run()

    def run_inline(self, payload: Payload) -> Any:
        """Run a job now in this thread, through the client and server chains.

        The JSON round trip makes an inline run see exactly what a worker would.
        """
        with capture(None):  # run now, not collected by an open batch block
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

    def report_retry(self, payload: Payload, exc: BaseException) -> None:
        for handler in list(self.retry_handlers):
            try:
                handler(payload, exc)
            except Exception:
                logger.exception("retry handler %r raised", handler)


class Execution:
    """One run of one decoded payload: the only way any job is run (workers, inline, tests).

    It finds the registered class, makes a fresh instance, and calls ``perform`` inside the
    server middleware, seeing an ``async def`` perform (or any awaitable it returns) through
    to its end on this thread's loop, so middleware wraps the whole run and a coroutine is
    never mistaken for a finished job. ``job`` stays on the execution rather than being
    returned because a failed run needs it too: the retry handler asks that same instance
    for ``retry_in`` and ``retries_exhausted``.
    """

    __slots__ = ("contain_exits", "job", "payload", "wurk")

    def __init__(self, wurk: Wurk, payload: Payload, *, contain_exits: bool = False) -> None:
        self.wurk = wurk
        self.payload = payload
        #: The job instance, once its class is found (``None`` if that failed).
        self.job: Any = None
        #: A worker's run: a ``BaseException`` the job raises (``sys.exit()``) is its failure,
        #: raised as ``JobExit`` where it leaves ``perform`` so that every middleware sees an
        #: ordinary error (``core/control.py``). Inline runs leave it as it is: there a
        #: ``KeyboardInterrupt`` may be the person at the terminal.
        self.contain_exits = contain_exits

    def run(self) -> Any:
        wurk, payload = self.wurk, self.payload
        wrapped = payload["class"] in activejob.WRAPPERS
        job = self.job = self._job_class(wrapped)()
        job.jid = payload.get("jid", "")
        job.payload = payload
        result: list[Any] = [None]

        def perform() -> None:
            # Read here, inside the middleware: a server middleware may give the job other
            # arguments than the stored ones (encryption opens the last one only for the run).
            if wrapped:
                args, kwargs = activejob.arguments(payload)
            else:
                args = payload["args"]
                try:
                    kwargs = arguments.keywords(payload)
                except ValueError as exc:
                    raise UnrunnableJob(str(exc)) from None
            try:
                value = job.perform(*args, **kwargs)
                # Most jobs return None: skip the awaitable checks for them, this is the hot path.
                result[0] = (
                    value if value is None else coroutines.settle(value, f"{type(job).__qualname__}.perform")
                )
            except (Exception, WorkerSignal):
                raise
            except BaseException as exc:
                if not self.contain_exits:
                    raise
                raise JobExit(exc) from exc

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
