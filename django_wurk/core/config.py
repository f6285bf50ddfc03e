"""The engine's one immutable configuration object.

The Django glue builds a ``Config`` from settings, the environment and CLI flags; tests
build one directly. Nothing in the engine reads globals or environment variables, so two
configurations can live side by side (a test and a worker, say) without surprises.

Every field corresponds to a key of the ``WURK`` settings dict: the key is the field name
in upper case. ``ConfigError`` always names that key, so a bad value is reported in the
words the user wrote it in. Keys only the Django app reads (``ENQUEUE``, ``DATABASE``, the
outbox relay, the push retries after a commit, the dashboard's) share that dict but are not
here: the glue keeps them in its own ``django_wurk.conf.Settings``, so the engine carries no
Django concern.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from django_wurk.core.wire import TimestampStyle

#: A whole queue name: ``\A``/``\Z``, because ``$`` also matches before a final newline, which let
#: "mail\n" through (``QUEUE_NAME.match`` and ``fullmatch`` agree on this pattern).
QUEUE_NAME = re.compile(r"\A[a-zA-Z0-9_:.\-]+\Z")
FETCH_MODES = ("reliable", "basic")
#: ``METRICS_LAYOUT``'s values: which Sidekiq versions' per-job metrics keys the heartbeat writes.
METRICS_LAYOUTS = ("auto", "8", "7", "both")
#: Field metadata: ``{KEY: False}`` marks a field that is not a ``WURK`` key.
KEY = "wurk_key"
S = TypeVar("S")


class ConfigError(ValueError):
    """A setting has a value we cannot run with; ``setting`` is its ``WURK`` key."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"WURK[{setting!r}]: {message}")
        self.setting = setting


class UnknownSetting(ConfigError):
    """A ``WURK`` key no layer reads (a typo, most often): it has no environment variable either."""

    def __init__(self, setting: str, known: Mapping[str, Any] | list[str]) -> None:
        super().__init__(setting, f"unknown setting{did_you_mean(setting, known)}")


@dataclass(frozen=True)
class QueueSpec:
    """A queue a worker listens to; weight 0 everywhere means strict order."""

    name: str
    weight: int = 0


#: A capsule's name: it appears in the heartbeat and in log lines.
CAPSULE_NAME = re.compile(r"\A[a-zA-Z0-9_.\-]+\Z")


@dataclass(frozen=True)
class CapsuleSpec:
    """A pool of job threads with its own queues (Sidekiq 7's capsule).

    A queue belongs to one capsule only: each capsule fetches into its own private lists,
    and a single-threaded capsule's promise (one job at a time) would not hold if another
    capsule's threads took from the same queue.
    """

    name: str
    queues: tuple[QueueSpec, ...]
    concurrency: int

    @property
    def strict_order(self) -> bool:
        return all(q.weight == 0 for q in self.queues)


@dataclass(frozen=True)
class Config:
    #: Kept out of ``repr()``: it may hold a password (``redact_url()`` makes it safe to show).
    redis_url: str = field(default="redis://127.0.0.1:6379/0", repr=False)
    #: Connections per process; defaults to concurrency + 5 (fetchers, poller, heartbeat).
    redis_pool_size: int | None = None
    redis_socket_timeout: float = 5.0
    concurrency: int = 5
    #: Worker processes ``runwurk`` forks (``-P``); ``"auto"`` in settings means one per CPU.
    processes: int = 1
    #: Recycle a worker process whose resident memory passes this many MB (``--max-memory-mb``).
    max_memory_mb: float | None = None
    queues: tuple[QueueSpec, ...] = (QueueSpec("default"),)
    timeout: float = 25.0
    tag: str = ""
    labels: tuple[str, ...] = ()
    timestamps: TimestampStyle = TimestampStyle.FLOAT_SECONDS
    max_retries: int = 25
    dead_max_jobs: int = 10_000
    dead_timeout: int = 180 * 24 * 3600
    heartbeat_interval: float = 10.0
    #: Seconds between scheduled-set polls for the whole cluster, per process (Sidekiq's
    #: ``average_scheduled_poll_interval``); ``poll_interval`` pins it exactly.
    average_scheduled_poll_interval: float = 5.0
    poll_interval: float | None = None
    #: BRPOP timeout: how long a fetcher blocks before it re-checks for shutdown.
    fetch_timeout: float = 2.0
    #: Also write the busy-work hash under ``<identity>:workers`` (Sidekiq <= 6.4.1 Web UI).
    legacy_workers_key: bool = False
    hostname: str = field(default_factory=socket.gethostname)
    strict_args: bool = True
    #: Maximum backtrace lines kept when a job says ``backtrace: true``.
    backtrace_limit: int = 1000
    #: Payloads a client keeps in memory while Redis is unreachable (0: raise at once).
    client_buffer: int = 0
    #: ``reliable`` (default): a fetched job stays in a per-process list in Redis until it
    #: is finished, and jobs of a dead process are recovered. ``basic``: plain BRPOP.
    fetch: str = "reliable"
    #: A process whose heartbeat is older than this (seconds) is dead; its jobs are recovered.
    process_dead_after: float = 60.0
    #: How often the reaper looks for dead processes' jobs (seconds).
    reaper_interval: float = 15.0
    #: A job recovered from dead processes this many times is buried instead of requeued.
    max_recoveries: int = 3
    #: After each push, wait until this many replicas have it (Redis ``WAIT``); 0: don't wait.
    push_wait_replicas: int = 0
    #: The longest a push waits for its replicas (seconds) before it returns anyway, with a warning.
    push_wait_timeout: float = 1.0
    #: Several pools of job threads in one process, each with its own queues and concurrency
    #: (``WURK["CAPSULES"]``, ``runwurk --capsule``). Empty: one pool, ``queues`` x ``concurrency``.
    #: When set, ``concurrency`` becomes the total and ``queues`` the union (as Sidekiq 7 reports them).
    capsules: tuple[CapsuleSpec, ...] = ()
    #: More Redis servers, by name (``{"bulk": url}``; JSON in the environment): a job class's or
    #: a push's ``shard`` option sends its jobs there. ``REDIS_URL`` is the shard ``"default"``.
    shards: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    #: The shard this process works (``runwurk --shard``) and pushes to when nothing says otherwise.
    shard: str = "default"
    #: The key the fleet's leader election holds. Our own by default: ``dear-leader`` is Sidekiq
    #: Enterprise's, and a Python leader holding it would stop Ruby's leader-only work. Set it
    #: to ``"dear-leader"`` to share one election with Ruby (docs/interop.md).
    leader_key: str = "wurk-leader"
    #: Which per-job metrics layouts the heartbeat writes: ``"8"`` (Sidekiq 8's ``j|YYMMDD|...``),
    #: ``"7"`` (Sidekiq 7's ``j|YYYYMMDD|...``), ``"both"``, or ``"auto"`` (8's, plus 7's while a
    #: Sidekiq 7 process is in the process set). Both layouts are always read.
    metrics_layout: str = "auto"
    #: Fleet-wide caps (``{"critical": 20}``): at most that many jobs of the queue run at once
    #: across every process (reliable fetch; docs/priority.md says how they are counted).
    queue_caps: tuple[tuple[str, int], ...] = ()

    #: The settings of the features that own them (``Feature.settings``), one object per
    #: feature; ``section(kind)`` reads one. Not a key itself: each object's fields are.
    sections: tuple[Any, ...] = field(default=(), repr=False, metadata={KEY: False})

    def __post_init__(self) -> None:
        _read_capsules(self)
        _validate(self)
        _check_shards(self)
        _check_queue_caps(self)

    def capsule_list(self) -> tuple[CapsuleSpec, ...]:
        """The pools a worker process runs: the configured capsules, or the one ``default`` pool."""
        return self.capsules or (CapsuleSpec("default", self.queues, self.concurrency),)

    def for_capsule(self, capsule: CapsuleSpec) -> Config:
        """This configuration narrowed to one capsule (what its manager and fetch read)."""
        if not self.capsules:
            return self
        return dataclasses.replace(self, capsules=(), queues=capsule.queues, concurrency=capsule.concurrency)

    def section(self, kind: type[S]) -> S:
        """The settings of the feature that owns ``kind``: as configured, or its defaults."""
        for value in self.sections:
            if type(value) is kind:
                return value
        return kind()

    def with_section(self, value: Any) -> Config:
        """This configuration with one feature's settings replaced by ``value``."""
        kept = tuple(v for v in self.sections if type(v) is not type(value))
        return dataclasses.replace(self, sections=(*kept, value))

    @property
    def pool_size(self) -> int:
        return self.redis_pool_size or self.concurrency + 5

    @property
    def weighted_queues(self) -> tuple[QueueSpec, ...]:
        """Queues for weighted fetch: as Sidekiq's CLI does, an unweighted queue counts once."""
        return tuple(QueueSpec(q.name, max(q.weight, 1)) for q in self.queues)

    @property
    def strict_order(self) -> bool:
        return all(q.weight == 0 for q in self.queues)

    @property
    def queue_names(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for q in self.queues:
            seen.setdefault(q.name, None)
        return tuple(seen)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], sections: Sequence[type[Any]] = ()) -> Config:
        """Build from a ``WURK``-style mapping (upper-case keys), coercing strings from the
        environment; the keys of ``sections`` (features' settings classes) build those."""
        owner = {key: kind for kind in sections for key in key_names(kind)}
        core = {k: v for k, v in values.items() if k not in owner}
        try:
            kwargs = fields_from_mapping(cls, core, lambda key, f, raw: _coerce(key, f.name, raw))
        except UnknownSetting as exc:
            raise UnknownSetting(exc.setting, [*setting_names(), *owner]) from None
        # A feature none of whose keys is set keeps its defaults (``section`` makes them).
        built = tuple(
            read_section(kind, mine)
            for kind in sections
            if (mine := {k: v for k, v in values.items() if owner.get(k) is kind})
        )
        # SHARDS["default"] may stand in for REDIS_URL; set both, they must agree (_check_shards).
        default = dict(kwargs.get("shards", ())).get(DEFAULT_SHARD)
        if default is not None and "redis_url" not in kwargs:
            kwargs["redis_url"] = default
        return cls(**kwargs, sections=built)

    def shard_names(self) -> tuple[str, ...]:
        """Every configured shard, ``"default"`` (``REDIS_URL``) first."""
        return (DEFAULT_SHARD, *(name for name, _ in self.shards if name != DEFAULT_SHARD))

    def shard_url(self, name: str) -> str:
        """Shard ``name``'s Redis URL (``UnknownShard`` if no shard is named so)."""
        if name == DEFAULT_SHARD:
            return self.redis_url
        for known, url in self.shards:
            if known == name:
                return url
        raise UnknownShard(name, self.shard_names())

    def shard_config(self, name: str) -> Config:
        """What connecting to shard ``name`` takes: this configuration with that shard's URL
        as its only Redis (``UnknownShard`` if no shard is named so)."""
        if name == DEFAULT_SHARD and not self.shards:
            return self
        return dataclasses.replace(self, redis_url=self.shard_url(name), shards=(), shard=DEFAULT_SHARD)


def fields_from_mapping(
    cls: type[Any], values: Mapping[str, Any], coerce: Callable[[str, dataclasses.Field[Any], Any], Any]
) -> dict[str, Any]:
    """A settings dataclass's keyword arguments from ``WURK``-style keys (upper-case field names).

    One reading for the engine's ``Config`` and the Django app's ``Settings``: an unknown key
    fails with the closest known name, and each value is coerced by ``coerce``.
    """
    known = {f.name.upper(): f for f in dataclasses.fields(cls) if f.metadata.get(KEY, True)}
    kwargs: dict[str, Any] = {}
    for key, raw in values.items():
        f = known.get(key)
        if f is None:
            raise UnknownSetting(key, known)
        kwargs[f.name] = coerce(key, f, raw)
    return kwargs


def key_names(cls: type[Any]) -> list[str]:
    """The ``WURK`` keys a settings dataclass reads: its fields' names in upper case."""
    return [f.name.upper() for f in dataclasses.fields(cls) if f.metadata.get(KEY, True)]


def setting_names(sections: Sequence[type[Any]] = ()) -> list[str]:
    """Every ``WURK`` key the engine reads, in declaration order, then those of ``sections``."""
    return key_names(Config) + [key for kind in sections for key in key_names(kind)]


def read_section(kind: type[S], values: Mapping[str, Any]) -> S:
    """A feature's settings from its ``WURK`` keys: a value from the environment (text) is
    read as the field's annotation says (``int``, ``float``, ``bool``, ``str``); any other
    annotation is left to the class itself, whose ``__post_init__`` reads and checks it."""

    def coerce(key: str, f: dataclasses.Field[Any], raw: Any) -> Any:
        parse = _BY_ANNOTATION.get(str(f.type))
        return parse(key, raw) if parse is not None else raw

    return kind(**fields_from_mapping(kind, values, coerce))


def did_you_mean(key: str, known: Mapping[str, Any] | list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key.upper(), list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_queue(setting: str, value: Any) -> QueueSpec:
    """``"name"``, ``"name,weight"``, ``("name", weight)`` or a ``QueueSpec``."""
    if isinstance(value, QueueSpec):
        name, weight = value.name, value.weight
    elif isinstance(value, str):
        name, _, weight_text = value.partition(",")
        name = name.strip()
        try:
            weight = int(weight_text) if weight_text.strip() else 0
        except ValueError:
            raise ConfigError(setting, f"queue weight in {value!r} is not an integer") from None
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        name, weight = value[0], value[1]
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise ConfigError(setting, f"queue weight in {value!r} is not an integer")
    else:
        raise ConfigError(setting, f"cannot read {value!r} as a queue; use 'name' or 'name,weight'")
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise ConfigError(setting, f"queue name {name!r} must match [a-zA-Z0-9_:.-]+")
    if weight < 0:
        raise ConfigError(setting, f"queue weight in {value!r} must be >= 0")
    return QueueSpec(name, weight)


def redact_url(url: str) -> str:
    """The URL with any password replaced (in the authority or as ``?password=``), safe for logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable redis url>"
    netloc = parts.netloc
    if parts.password is not None:
        user = parts.username or ""
        # Everything after the "@" as written: a Sentinel URL lists several host:port pairs,
        # which ``parts.port`` cannot parse.
        netloc = f"{user}:***@{netloc.rpartition('@')[2]}"
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing secret (and urlunsplit would drop the "//" of unix:///path)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


SENTINEL_SCHEME = "redis+sentinel"
#: Sentinel's own default port, for a host written without one.
SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    """Where the Sentinels are and which service (master name) they watch.

    ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]``: the
    credentials are the master's (and its replicas'), never sent to the Sentinels, which
    usually run without a password.
    """

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


def _sentinel_host(text: str) -> tuple[str, int]:
    host, port = text, ""
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"bad Sentinel address {text!r}")
        port = rest[1:]
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not host:
        raise ValueError(f"a Sentinel address has no host: {text!r}")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad Sentinel port in {text!r}")
    return host, int(port)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The parts of a ``redis+sentinel://`` URL; ValueError says what is wrong (no password in it)."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
    userinfo, at, hosts = parts.netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    if not hosts:
        raise ValueError("no Sentinel host:port")
    sentinels = tuple(_sentinel_host(item.strip()) for item in hosts.split(","))
    segments = parts.path.strip("/").split("/") if parts.path.strip("/") else []
    if not segments:
        raise ValueError("no service name (the master's name in Sentinel): /service_name[/db]")
    if len(segments) > 2:
        raise ValueError("expected /service_name[/db] after the Sentinel hosts")
    db = 0
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise ValueError(f"the database must be a number, got {segments[1]!r}")
        db = int(segments[1])
    return SentinelUrl(sentinels, unquote(segments[0]), db, username, password)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _coerce(key: str, name: str, raw: Any) -> Any:
    """Turn a settings or environment value into the field's type, or name the key."""
    if name == "queues":
        items = raw.split(";") if isinstance(raw, str) else raw
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise ConfigError(key, f"expected a list of queues, got {raw!r}")
        return tuple(parse_queue(key, item) for item in items)
    if name == "labels":
        items = raw.split(",") if isinstance(raw, str) else raw
        if isinstance(items, bytes) or not hasattr(items, "__iter__"):
            raise ConfigError(key, f"expected a list of labels, got {raw!r}")
        return tuple(str(i).strip() for i in items if str(i).strip())
    if name == "timestamps":
        try:
            return TimestampStyle(raw)
        except ValueError:
            raise ConfigError(
                key, f"must be 'float' (seconds) or 'ms' (Sidekiq 8 milliseconds), got {raw!r}"
            ) from None
    if name == "capsules":
        return parse_capsules(key, raw)
    if name == "shards":
        return _parse_shards(key, raw)
    if name == "queue_caps":
        return parse_queue_caps(key, raw)
    if name in ("legacy_workers_key", "strict_args"):
        return parse_bool(key, raw)
    if name in ("redis_pool_size", "poll_interval", "max_memory_mb") and (raw is None or raw == ""):
        return None
    if name == "processes" and isinstance(raw, str) and raw.strip().lower() == "auto":
        return os.cpu_count() or 1
    if name in (
        "concurrency",
        "max_retries",
        "dead_max_jobs",
        "dead_timeout",
        "redis_pool_size",
        "backtrace_limit",
        "max_recoveries",
        "processes",
        "client_buffer",
        "push_wait_replicas",
    ):
        return parse_number(key, raw, int)
    if name in (
        "timeout",
        "heartbeat_interval",
        "average_scheduled_poll_interval",
        "poll_interval",
        "fetch_timeout",
        "redis_socket_timeout",
        "process_dead_after",
        "reaper_interval",
        "max_memory_mb",
        "push_wait_timeout",
    ):
        return parse_number(key, raw, float)
    return parse_text(key, raw)


# The parsers of single values, shared with the Django app's own settings (``django_wurk.conf``)
# so that a value means the same whichever layer reads it.


def parse_bool(key: str, raw: Any) -> bool:
    """``True``/``False``, or the words the environment writes them with."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise ConfigError(key, f"expected true or false, got {raw!r}")


def parse_text(key: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise ConfigError(key, f"expected a string, got {raw!r}")
    return raw


def parse_number(key: str, raw: Any, kind: type[int] | type[float]) -> int | float:
    """An int or a float from a number or its text; ``True`` is not 1 here."""
    if isinstance(raw, bool):
        raise ConfigError(key, f"expected a number, got {raw!r}")
    if kind is int and isinstance(raw, float) and not raw.is_integer():
        raise ConfigError(key, f"expected an integer, got {raw!r}")
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            key, f"expected {'an integer' if kind is int else 'a number'}, got {raw!r}"
        ) from None


#: How ``read_section`` reads a value of each plain annotation (a string, from the environment).
_BY_ANNOTATION: dict[str, Callable[[str, Any], Any]] = {
    "int": lambda key, raw: parse_number(key, raw, int),
    "float": lambda key, raw: parse_number(key, raw, float),
    "bool": parse_bool,
    "str": parse_text,
}


def _validate(c: Config) -> None:
    scheme = urlsplit(c.redis_url).scheme if isinstance(c.redis_url, str) else ""
    if scheme not in ("redis", "rediss", "unix", SENTINEL_SCHEME):
        raise ConfigError(
            "REDIS_URL",
            f"must be a redis://, rediss://, unix:// or {SENTINEL_SCHEME}:// URL, "
            f"got {redact_url(str(c.redis_url))!r}",
        )
    if scheme == SENTINEL_SCHEME:
        try:
            parse_sentinel_url(c.redis_url)
        except ValueError as exc:
            raise ConfigError("REDIS_URL", f"{exc}, in {redact_url(c.redis_url)!r}") from None
    positive = {
        "CONCURRENCY": c.concurrency,
        "PROCESSES": c.processes,
        "HEARTBEAT_INTERVAL": c.heartbeat_interval,
        "AVERAGE_SCHEDULED_POLL_INTERVAL": c.average_scheduled_poll_interval,
        "FETCH_TIMEOUT": c.fetch_timeout,
        "REDIS_SOCKET_TIMEOUT": c.redis_socket_timeout,
        "DEAD_TIMEOUT": c.dead_timeout,
        "BACKTRACE_LIMIT": c.backtrace_limit,
        "PROCESS_DEAD_AFTER": c.process_dead_after,
        "REAPER_INTERVAL": c.reaper_interval,
        "MAX_RECOVERIES": c.max_recoveries,
        "PUSH_WAIT_TIMEOUT": c.push_wait_timeout,
    }
    for key, value in positive.items():
        if not value > 0:
            raise ConfigError(key, f"must be greater than 0, got {value!r}")
    non_negative = {
        "TIMEOUT": c.timeout,
        "MAX_RETRIES": c.max_retries,
        "DEAD_MAX_JOBS": c.dead_max_jobs,
        "CLIENT_BUFFER": c.client_buffer,
        "PUSH_WAIT_REPLICAS": c.push_wait_replicas,
    }
    for key, value in non_negative.items():
        if not value >= 0:  # written so that NaN fails too
            raise ConfigError(key, f"must be 0 or more, got {value!r}")
    if c.fetch not in FETCH_MODES:
        raise ConfigError("FETCH", f"must be one of {', '.join(FETCH_MODES)}, got {c.fetch!r}")
    if c.heartbeat_interval >= 60:
        # The process hash lives 60 s; beating less often makes the process vanish from
        # every dashboard between beats.
        raise ConfigError("HEARTBEAT_INTERVAL", f"must be under 60 seconds, got {c.heartbeat_interval!r}")
    if c.redis_pool_size is not None and c.redis_pool_size < 1:
        raise ConfigError("REDIS_POOL_SIZE", f"must be at least 1, got {c.redis_pool_size!r}")
    if c.poll_interval is not None and not c.poll_interval > 0:
        raise ConfigError("POLL_INTERVAL", f"must be greater than 0, got {c.poll_interval!r}")
    if not c.queues:
        raise ConfigError("QUEUES", "at least one queue is needed")
    if not isinstance(c.timestamps, TimestampStyle):
        raise ConfigError("TIMESTAMPS", f"must be a TimestampStyle, got {c.timestamps!r}")
    if c.metrics_layout not in METRICS_LAYOUTS:
        raise ConfigError(
            "METRICS_LAYOUT", f"must be one of {', '.join(METRICS_LAYOUTS)}, got {c.metrics_layout!r}"
        )
    if not isinstance(c.leader_key, str) or not c.leader_key.strip():
        raise ConfigError("LEADER_KEY", f"must be a non-empty key name, got {c.leader_key!r}")


# Capsules -------------------------------------------------------------------------------


def parse_capsule(setting: str, name: Any, value: Any) -> CapsuleSpec:
    """One capsule: ``{"queues": [...], "concurrency": N}``, or its text ``name:N:q1,w1;q2``."""
    if isinstance(value, CapsuleSpec):
        return value
    if isinstance(name, CapsuleSpec):  # already read (a list of them)
        return name
    if value is None and isinstance(name, str):  # the text form
        capsule_name, _, rest = name.strip().partition(":")
        concurrency_text, sep, queues_text = rest.partition(":")
        if not sep or not queues_text.strip():
            raise ConfigError(
                setting, f"cannot read {name!r} as a capsule; use 'name:concurrency:queue1;queue2,weight'"
            )
        return parse_capsule(
            setting, capsule_name, {"queues": queues_text.split(";"), "concurrency": concurrency_text}
        )
    if not isinstance(name, str) or not CAPSULE_NAME.fullmatch(name):
        raise ConfigError(setting, f"capsule name {name!r} must match [a-zA-Z0-9_.-]+")
    if not isinstance(value, Mapping):
        raise ConfigError(
            setting, f"capsule {name!r} must be a dict with 'queues' and 'concurrency', got {value!r}"
        )
    unknown = set(value) - {"queues", "concurrency"}
    if unknown:
        raise ConfigError(
            setting, f"capsule {name!r} has unknown key(s) {', '.join(map(repr, sorted(unknown, key=str)))}"
        )
    raw_queues = value.get("queues")
    if isinstance(raw_queues, (str, bytes)) or not isinstance(raw_queues, (list, tuple)) or not raw_queues:
        raise ConfigError(setting, f"capsule {name!r} needs a non-empty list of 'queues', got {raw_queues!r}")
    queues = tuple(parse_queue(setting, q) for q in raw_queues)
    concurrency = parse_number(setting, value.get("concurrency", 5), int)
    if not concurrency >= 1:
        raise ConfigError(setting, f"capsule {name!r} needs a concurrency of at least 1, got {concurrency!r}")
    return CapsuleSpec(name, queues, int(concurrency))


def parse_capsules(setting: str, raw: Any) -> tuple[CapsuleSpec, ...]:
    """``{name: {"queues": [...], "concurrency": N}}``, a list of text forms, or text separated by spaces."""
    if isinstance(raw, str):
        raw = raw.split()
    if isinstance(raw, Mapping):
        capsules = [parse_capsule(setting, name, value) for name, value in raw.items()]
    elif isinstance(raw, (list, tuple)):
        capsules = [parse_capsule(setting, item, None) for item in raw]
    else:
        raise ConfigError(setting, f"expected a dict of capsules, got {raw!r}")
    return tuple(capsules)


def _read_capsules(c: Config) -> None:
    """Check the capsules against each other, and derive ``concurrency``/``queues`` from them.

    Setting ``CONCURRENCY`` or ``QUEUES`` as well would leave two answers to "which queues,
    how many threads": an error, unless it says what the capsules say.
    """
    if not c.capsules:
        return
    capsules = parse_capsules("CAPSULES", c.capsules) if not isinstance(c.capsules, tuple) else c.capsules
    seen_names: set[str] = set()
    owner: dict[str, str] = {}
    for capsule in capsules:
        if not isinstance(capsule, CapsuleSpec):
            raise ConfigError("CAPSULES", f"expected CapsuleSpec entries, got {capsule!r}")
        if capsule.name in seen_names:
            raise ConfigError("CAPSULES", f"capsule {capsule.name!r} is defined twice")
        seen_names.add(capsule.name)
        if capsule.concurrency < 1:
            raise ConfigError("CAPSULES", f"capsule {capsule.name!r} needs a concurrency of at least 1")
        if not capsule.queues:
            raise ConfigError("CAPSULES", f"capsule {capsule.name!r} has no queues")
        for q in capsule.queues:
            if q.name in owner and owner[q.name] != capsule.name:
                raise ConfigError(
                    "CAPSULES",
                    f"queue {q.name!r} is in capsules {owner[q.name]!r} and {capsule.name!r}; "
                    "a queue belongs to one capsule",
                )
            owner[q.name] = capsule.name
    total = sum(capsule.concurrency for capsule in capsules)
    union = tuple(q for capsule in capsules for q in capsule.queues)
    defaults = Config.__dataclass_fields__
    if c.concurrency not in (defaults["concurrency"].default, total):
        raise ConfigError(
            "CONCURRENCY",
            f"cannot be set together with CAPSULES (each capsule has its own); got {c.concurrency!r}",
        )
    if c.queues not in (defaults["queues"].default, union):
        raise ConfigError("QUEUES", "cannot be set together with CAPSULES (each capsule has its own queues)")
    object.__setattr__(c, "capsules", capsules)
    object.__setattr__(c, "concurrency", total)
    object.__setattr__(c, "queues", union)


# Shards ---------------------------------------------------------------------------------

DEFAULT_SHARD = "default"


class UnknownShard(ValueError):
    """A push or a process names a shard ``WURK["SHARDS"]`` does not list."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        super().__init__(f"no shard is named {name!r}; WURK['SHARDS'] names {', '.join(map(repr, known))}")
        self.name = name


def _parse_shards(key: str, raw: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(raw, str):  # from the environment: a JSON object
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ConfigError(
                key, f"expected a JSON object of shard names to Redis URLs, got {raw!r}"
            ) from None
    if isinstance(raw, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in raw):
        raw = dict(raw)
    if not isinstance(raw, Mapping):
        raise ConfigError(key, f"expected a dict of shard names to Redis URLs, got {type(raw).__name__}")
    return tuple((name, url) for name, url in raw.items())


def parse_queue_caps(key: str, raw: Any) -> tuple[tuple[str, int], ...]:
    """``{"critical": 20}`` (or its JSON, from the environment) as ``(("critical", 20),)``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ConfigError(key, f"expected a JSON object of queue names to caps, got {raw!r}") from None
    if isinstance(raw, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in raw):
        raw = dict(raw)
    if not isinstance(raw, Mapping):
        raise ConfigError(key, f"expected a dict of queue names to caps, got {type(raw).__name__}")
    return tuple(raw.items())


def _check_queue_caps(c: Config) -> None:
    for name, cap in c.queue_caps:
        if not isinstance(name, str) or not QUEUE_NAME.match(name):
            raise ConfigError("QUEUE_CAPS", f"a queue name must match [a-zA-Z0-9_:.-]+, got {name!r}")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(
                "QUEUE_CAPS", f"the cap of queue {name!r} must be an integer of at least 1, got {cap!r}"
            )
    if c.queue_caps and c.fetch != "reliable":
        raise ConfigError(
            "QUEUE_CAPS",
            "caps are counted in reliable fetch's private lists; they need FETCH = 'reliable', "
            f"not {c.fetch!r}",
        )


def _check_shards(c: Config) -> None:
    for name, url in c.shards:
        if not isinstance(name, str) or not QUEUE_NAME.match(name):
            raise ConfigError("SHARDS", f"a shard name must match [a-zA-Z0-9_:.-]+, got {name!r}")
        if name == DEFAULT_SHARD:
            if url != c.redis_url:
                raise ConfigError(
                    "SHARDS",
                    "the 'default' shard is REDIS_URL; WURK['SHARDS']['default'] and WURK['REDIS_URL'] "
                    f"are both set and differ ({redact_url(str(url))!r} and {redact_url(c.redis_url)!r}): "
                    "set one of them",
                )
            continue
        try:
            # The same URL rules as REDIS_URL (one check, whatever schemes it accepts).
            dataclasses.replace(c, redis_url=url, shards=(), shard=DEFAULT_SHARD)
        except ConfigError as exc:
            if exc.setting != "REDIS_URL":
                raise
            raise ConfigError("SHARDS", f"shard {name!r}: {exc}") from None
    if c.shard not in c.shard_names():
        raise ConfigError("SHARD", str(UnknownShard(c.shard, c.shard_names())))
