"""Draining a Celery broker: every message on its Redis lists becomes a wurk job, none is lost.

The migration aid for a cutover: Celery producers (other services, old code) keep sending
while the drain moves what they send, and what was already queued (ETA messages included),
into wurk, each message as a call of the task registered under its Celery name
(``django_wurk.celery.lookup``), with the Celery task id as the jid.

Why the drain takes messages itself instead of through a kombu ``Consumer``: kombu's Redis
transport pops a message (``BRPOP``) and only then writes it to its ``unacked`` hash, so a
drain killed between the two loses it; and it parses the message in between, so an entry
that is not kombu's JSON is popped, raises, and is gone. Here a message is moved, as the
exact bytes, from the queue's list to the drain's own *held* list on the broker in one
atomic command (``RPOPLPUSH``); it leaves that list (the acknowledgement, ``LREM``) only
after its job is in wurk's Redis, or after it was filed in wurk's dead set. A drain that is
killed leaves at most the message in hand on its held list, and the next drain finishes
that message first. kombu still does what it is good at: the broker URL and its transport
options (TLS, Sentinel, ``global_keyprefix``, priority steps) and decoding bodies with its
serializer registry, so ``datetime``, ``Decimal`` and ``UUID`` arguments come back as the
objects Celery would hand the task. Only JSON is decoded: pickle, yaml and anything else go
to the dead set with the reason, never through an insecure serializer.

Pushing twice is what the crash window between "job pushed" and "message removed" could
cause; the push is therefore ``push_once``: one Lua script that sets a marker named after
the message's kombu delivery tag (unique per publish) and pushes the job, or does nothing
when the marker is there. The push is also immediate and durable on purpose: it goes to
Redis directly (``client.capture``), never deferred to a database transaction's commit or
written to the outbox, because the message is acknowledged the moment the push returns.

One drain runs per broker at a time (a lease in the broker's Redis): a second one would
see the first one's held message as left behind by a crash and push it concurrently.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis
from redis.exceptions import RedisError

from django_wurk.celery.canvas import Signature, UnsupportedWorkflow, from_celery_callbacks, from_celery_chain
from django_wurk.core import keys, wire
from django_wurk.core.client import NO_DELIVERY, Delivery, capture
from django_wurk.core.config import redact_url
from django_wurk.core.dead_set import bury, invalid_payload_envelope
from django_wurk.core.engine import Wurk
from django_wurk.core.features.timeouts.option import MOST as TIMEOUT_MOST
from django_wurk.core.lease import Lease
from django_wurk.core.scripts import Scripts
from django_wurk.core.wire import Payload

logger = logging.getLogger("django_wurk.celery.drain")

#: The only content type decoded. pickle and yaml can run code while decoding; msgpack and
#: the rest are refused too rather than half supported.
JSON = "application/json"
_INSECURE = {
    "application/x-python-serialize": "pickle",
    "application/x-yaml": "yaml",
    "application/yaml": "yaml",
}
#: Broker URL schemes whose kombu transport is the Redis one (lists, kombu's envelope).
REDIS_SCHEMES = ("redis://", "rediss://", "sentinel://")


class Task(Protocol):
    """What the drain needs of a task from ``django_wurk.celery``: Celery's ``apply_async``."""

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        task_id: str | None = None,
        eta: Any = None,
        expires: Any = None,
        **options: Any,
    ) -> Any: ...


Lookup = Callable[[str], Task | None]


class DrainError(Exception):
    """The drain cannot go on; the message says why, readably. The message in hand stays held."""


class BrokerError(DrainError):
    """The broker cannot be used (unreachable, not Redis, busy with another drain)."""


class DeadSetFull(DrainError):
    """Burying one more message would trim the dead set, dropping its oldest entry."""


class Refused(Exception):
    """A message that cannot become a job; it goes to the dead set with this reason."""

    def __init__(self, error_class: str, reason: str) -> None:
        super().__init__(reason)
        self.error_class = error_class


@dataclass(frozen=True)
class CeleryMessage:
    """One Celery task message, decoded (protocol 2, or the older protocol 1)."""

    task: str
    id: str
    args: list[Any]
    kwargs: dict[str, Any]
    eta: str | None
    expires: str | None
    #: How many times Celery retried the task before this message (its ``retries`` header).
    retries: int
    #: kombu's delivery tag (a fresh uuid per publish), or a digest of the message's bytes.
    delivery: str
    #: The rest of a chain this message starts, as Celery embeds it (next step last); handed
    #: to ``apply_async(chain=...)``, so the steps run on wurk workers after this one.
    chain: list[Any] = field(default_factory=list)
    #: Celery's ``timelimit`` header, ``(time_limit, soft_time_limit)``: the job's ``timeout``
    #: and ``soft_timeout``; None where the message sets none (the task's own limit applies).
    timelimit: tuple[float | None, float | None] = (None, None)
    #: Celery's ``callbacks`` and ``errbacks``: the job's ``link`` and ``link_error``.
    link: list[Signature] = field(default_factory=list)
    link_error: list[Signature] = field(default_factory=list)


@dataclass
class Tally:
    """What a drain did: ``moved`` became jobs, ``dead`` went to the dead set, ``skipped``
    were acknowledged without a push (pushed before a crash, or dropped by client middleware)."""

    moved: int = 0
    dead: int = 0
    skipped: int = 0

    @property
    def handled(self) -> int:
        return self.moved + self.dead + self.skipped

    def __str__(self) -> str:
        return f"moved {self.moved}, dead {self.dead}, skipped {self.skipped}"


# Decoding ---------------------------------------------------------------------------------


def decode(raw: bytes) -> CeleryMessage:
    """The Celery message in a broker list entry (kombu's JSON envelope); ``Refused`` if none."""
    try:
        envelope = wire.decode_json(raw, "broker message")
    except wire.PayloadError as exc:
        raise Refused("InvalidCeleryMessage", str(exc)) from None
    if not isinstance(envelope, dict):
        raise Refused(
            "InvalidCeleryMessage",
            f"broker message is a JSON {type(envelope).__name__}, not kombu's envelope",
        )
    properties = _field(envelope, "properties", dict, required=True)
    headers = _field(envelope, "headers", dict) or {}
    body = _body(envelope, properties)
    content_type = _field(envelope, "content-type", str) or ""
    content_encoding = _field(envelope, "content-encoding", str) or "utf-8"
    decoded = _deserialize(body, content_type, content_encoding, headers)
    tag = properties.get("delivery_tag")
    delivery = tag if isinstance(tag, str) and tag else "sha256-" + hashlib.sha256(raw).hexdigest()
    if "task" in headers:
        return _protocol_2(headers, decoded, delivery)
    if isinstance(decoded, dict) and "task" in decoded:
        return _protocol_1(decoded, delivery)
    raise Refused(
        "InvalidCeleryMessage", "neither a Celery protocol 2 message (no 'task' header) nor protocol 1"
    )


def _field(data: Mapping[str, Any], name: str, kind: type, required: bool = False) -> Any:
    value = data.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind):
        shown = "missing" if value is None else f"a {type(value).__name__}"
        raise Refused("InvalidCeleryMessage", f"broker message '{name}' is {shown}, not a {kind.__name__}")
    return value


def _body(envelope: Mapping[str, Any], properties: Mapping[str, Any]) -> bytes:
    body = envelope.get("body", "")
    if not isinstance(body, str):
        raise Refused(
            "InvalidCeleryMessage", f"broker message 'body' is a {type(body).__name__}, not a string"
        )
    encoding = properties.get("body_encoding")
    if encoding == "base64":
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Refused(
                "InvalidCeleryMessage", f"broker message body is not valid base64 ({exc})"
            ) from None
    if encoding in (None, ""):
        return body.encode("utf-8", "surrogatepass")
    raise Refused(
        "InvalidCeleryMessage", f"broker message body encoding {encoding!r} is not kombu's (base64)"
    )


def _deserialize(body: bytes, content_type: str, content_encoding: str, headers: Mapping[str, Any]) -> Any:
    from kombu import compression, serialization

    # kombu's functions are not annotated; these say what the drain relies on.
    decompress: Callable[[bytes, str], bytes] = compression.decompress
    deserialize: Callable[..., Any] = serialization.loads

    if content_type != JSON:
        insecure = _INSECURE.get(content_type)
        if insecure:
            raise Refused(
                "RefusedSerializer",
                f"content type {content_type!r} ({insecure}) is refused: decoding it could run code, so the"
                " drain decodes JSON only; send the message again with serializer='json'",
            )
        raise Refused(
            "RefusedSerializer",
            f"content type {content_type!r} is not decoded: the drain reads JSON messages only",
        )
    compressed = headers.get("compression")
    if compressed is not None:
        try:
            body = decompress(body, str(compressed))
        except Exception as exc:
            raise Refused(
                "InvalidCeleryMessage", f"body cannot be decompressed as {compressed!r} ({exc})"
            ) from None
    if wire.too_deep(body):
        raise Refused("InvalidCeleryMessage", f"body nesting is too deep (at most {wire.MAX_NESTING} levels)")
    try:
        return deserialize(body, content_type, content_encoding, accept=[JSON])
    except Exception as exc:
        # kombu's DecodeError, a bad {"__type__": ...} envelope (ValueError), anything the
        # decoder raises: the message is at fault, never the drain.
        raise Refused("InvalidCeleryMessage", f"body is not valid JSON for kombu ({exc})") from None


def _protocol_2(headers: Mapping[str, Any], body: Any, delivery: str) -> CeleryMessage:
    task, task_id = headers.get("task"), headers.get("id")
    if not isinstance(task, str) or not task:
        raise Refused("InvalidCeleryMessage", "header 'task' is not a task name")
    if not isinstance(task_id, str) or not task_id:
        raise Refused("InvalidCeleryMessage", f"task {task!r}: header 'id' is not a task id")
    if not isinstance(body, list) or len(body) != 3:
        raise Refused(
            "InvalidCeleryMessage",
            f"task {task!r} id {task_id}: body is not [args, kwargs, embed] (protocol 2)",
        )
    args, kwargs, embed = body
    embed = embed if isinstance(embed, dict) else {}
    _refuse_workflow(task, task_id, embed, ("chord",))
    return CeleryMessage(
        task,
        task_id,
        _args(task, task_id, args),
        _kwargs(task, task_id, kwargs),
        _moment(task, task_id, headers, "eta"),
        _moment(task, task_id, headers, "expires"),
        _retries(headers),
        delivery,
        _chain(task, task_id, embed.get("chain")),
        _timelimit(headers),
        _callbacks(task, task_id, embed.get("callbacks"), "callbacks"),
        _callbacks(task, task_id, embed.get("errbacks"), "errbacks"),
    )


def _protocol_1(body: Mapping[str, Any], delivery: str) -> CeleryMessage:
    task, task_id = body.get("task"), body.get("id")
    if not isinstance(task, str) or not task:
        raise Refused("InvalidCeleryMessage", "protocol 1 body 'task' is not a task name")
    if not isinstance(task_id, str) or not task_id:
        raise Refused("InvalidCeleryMessage", f"task {task!r}: protocol 1 body 'id' is not a task id")
    _refuse_workflow(task, task_id, body, ("chord",))
    return CeleryMessage(
        task,
        task_id,
        _args(task, task_id, body.get("args")),
        _kwargs(task, task_id, body.get("kwargs")),
        _moment(task, task_id, body, "eta"),
        _moment(task, task_id, body, "expires"),
        _retries(body),
        delivery,
        timelimit=_timelimit(body),
        link=_callbacks(task, task_id, body.get("callbacks"), "callbacks"),
        link_error=_callbacks(task, task_id, body.get("errbacks"), "errbacks"),
    )


def _refuse_workflow(task: str, task_id: str, embed: Mapping[str, Any], names: Sequence[str]) -> None:
    """A chord would silently stop at this job (its body never called): keep the message instead."""
    carried = [name for name in names if embed.get(name)]
    if carried:
        raise Refused(
            "UnsupportedCeleryWorkflow",
            f"task {task!r} id {task_id} carries Celery {', '.join(carried)}, which the drain does not"
            " carry over (the workflow would stop after this step); the message is kept here",
        )


def _chain(task: str, task_id: str, steps: Any) -> list[Any]:
    """The embedded chain, checked now: a group or chord inside it (or a step with callbacks)
    cannot go on here, so the message is kept rather than run in part."""
    if not steps:
        return []
    try:
        from_celery_chain(steps)
    except UnsupportedWorkflow as exc:
        raise Refused(
            "UnsupportedCeleryWorkflow",
            f"task {task!r} id {task_id} starts a Celery chain the drain cannot carry over ({exc});"
            " the message is kept here",
        ) from None
    return list(steps)


def _callbacks(task: str, task_id: str, items: Any, what: str) -> list[Signature]:
    """A message's callbacks or errbacks, checked now: one that is not a plain task signature
    (a group, a chord, callbacks of its own) would not run, so the message is kept instead."""
    try:
        return from_celery_callbacks(items, what)
    except UnsupportedWorkflow as exc:
        raise Refused(
            "UnsupportedCeleryWorkflow",
            f"task {task!r} id {task_id} carries Celery {what} the drain cannot carry over ({exc});"
            " the message is kept here",
        ) from None


def _args(task: str, task_id: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Refused("InvalidCeleryMessage", f"task {task!r} id {task_id}: args is a {type(value).__name__}")
    return value


def _kwargs(task: str, task_id: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(
            "InvalidCeleryMessage", f"task {task!r} id {task_id}: kwargs is a {type(value).__name__}"
        )
    return value


def _retries(source: Mapping[str, Any]) -> int:
    """Celery's retry count; anything but a count is read as none (it only informs the task)."""
    value = source.get("retries")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _timelimit(source: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """Celery's ``[time_limit, soft_time_limit]``; anything but seconds > 0 reads as no limit
    there (Celery's own default is ``[None, None]``)."""
    value = source.get("timelimit")
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return (None, None)
    hard, soft = (
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < TIMEOUT_MOST else None
        for v in value
    )
    return (hard, soft)


def _moment(task: str, task_id: str, source: Mapping[str, Any], name: str) -> str | None:
    value = source.get(name)
    if value is None or isinstance(value, str):
        return value or None
    raise Refused(
        "InvalidCeleryMessage",
        f"task {task!r} id {task_id}: {name} is a {type(value).__name__}, not an ISO time",
    )


# Pushing ----------------------------------------------------------------------------------


class OncePusher:
    """Receives the pushes of one message's ``apply_async`` and makes each the writer's ``write_once``.

    Installed with ``client.capture`` for the call, it replaces the app's pusher: no
    transaction, outbox or outage buffer stands between the push and Redis, so when
    ``apply_async`` returns the job is in Redis, or an exception says it is not.
    """

    def __init__(self, wurk: Wurk, delivery: str) -> None:
        self.wurk = wurk
        self.delivery = delivery
        self.pushed = 0
        self.already = 0

    def push(self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY) -> None:
        for index, payload in enumerate(payloads):
            marker = keys.celery_drain_marker(self.delivery if not index else f"{self.delivery}:{index}")
            if self.wurk.writer.write_once(marker, payload, at, keys.CELERY_DRAIN_MARKER_TTL):
                self.pushed += 1
            else:
                self.already += 1


# The drain --------------------------------------------------------------------------------


@dataclass
class Drain:
    """Moves the messages of ``queues`` on the Celery broker at ``broker_url`` into ``wurk``."""

    broker_url: str
    queues: list[str]
    wurk: Wurk
    lookup: Lookup
    follow: bool = False
    limit: int | None = None
    lease_seconds: float = 30.0
    #: Called with the tally every ``progress_every`` seconds while draining.
    progress: Callable[[Tally], None] = lambda tally: None
    progress_every: float = 2.0
    transport_options: Mapping[str, Any] = field(default_factory=dict)
    #: First give back to these queues what kombu's ``unacked`` hash holds for them (messages
    #: Celery workers took and never acknowledged): only with every Celery worker stopped.
    restore_unacked: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)
    tally: Tally = field(default_factory=Tally)
    #: How many messages ``restore_unacked`` gave back.
    restored: int = 0

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("the drain needs at least one queue")
        # With --follow the drain blocks up to a second at a time, between two renewals.
        if self.lease_seconds < (3.0 if self.follow else 0.5):
            raise ValueError(
                f"the drain's lease must last at least {3 if self.follow else 0.5} seconds"
                f"{' with --follow' if self.follow else ''}, got {self.lease_seconds}"
            )

    def run(self) -> Tally:
        """Drain until the queues are empty (or ``stop()``, or ``limit``; forever with ``follow``)."""
        connection, client, prefix, list_keys = self._connect()
        scripts = Scripts(client.execute_command)
        lease = Lease(
            scripts,
            prefix + keys.CELERY_DRAIN_LOCK,
            wire.new_jid(),
            self.lease_seconds,
        )
        self._take_lease(lease)
        try:
            if self.restore_unacked:
                channel: Any = connection.default_channel
                self.restored = self._restore(
                    client,
                    scripts,
                    prefix + channel.unacked_key,
                    prefix + channel.unacked_index_key,
                    list_keys,
                )
            self._drain(client, prefix, list_keys, lease)
        finally:
            with contextlib.suppress(RedisError):  # else it expires on its own
                lease.release()
            client.close()
            connection.release()
        return self.tally

    def stop(self) -> None:
        """Finish the message in hand, then return from ``run`` (a signal handler may call it)."""
        self.stopping.set()

    def _connect(self) -> tuple[Any, redis.Redis, str, dict[str, list[str]]]:
        """A plain client on the broker, kombu's key prefix, and each queue's lists in fetch order."""
        from kombu.connection import Connection

        connect: Callable[..., Any] = Connection  # not annotated in kombu

        try:
            connection = connect(self.broker_url, transport_options=dict(self.transport_options))
            if connection.transport.driver_type != "redis":
                raise BrokerError(
                    f"the broker {redact_url(self.broker_url)} uses the {connection.transport.driver_type!r}"
                    f" transport; the drain reads Redis brokers only ({', '.join(REDIS_SCHEMES)})"
                )
            channel: Any = connection.default_channel
            # A plain client on kombu's own pool (its TLS, Sentinel and credentials); keys are
            # prefixed here, as kombu prefixes only the commands it uses itself.
            client = redis.Redis(connection_pool=channel.client.connection_pool)
            client.ping()
        except BrokerError:
            raise
        except Exception as exc:
            raise BrokerError(
                f"cannot reach the Celery broker at {redact_url(self.broker_url)}: {exc}"
            ) from exc
        prefix = str(channel.global_keyprefix or "")
        sep, steps = channel.sep, list(channel.priority_steps)
        list_keys = {
            queue: [prefix + (queue if not step else f"{queue}{sep}{step}") for step in steps]
            for queue in self.queues
        }
        return connection, client, prefix, list_keys

    def _restore(
        self,
        client: redis.Redis,
        scripts: Scripts,
        unacked: str,
        unacked_index: str,
        list_keys: dict[str, list[str]],
    ) -> int:
        """Give kombu's unacked messages for the drained queues back to those queues.

        kombu's Redis transport keeps what a consumer took and has not acknowledged in one
        hash (``tag -> [message, exchange, routing key]``), and only a running Celery
        consumer restores it, after ``visibility_timeout`` (an hour by default): with the
        Celery workers gone for good, a message a killed worker held would wait there
        forever. An entry that cannot be read, or whose routing key is not one of the
        drained queues, is left alone (logged).
        """
        restored = 0
        for tag in self._broker(client.hkeys, unacked):
            entry = self._broker(client.hget, unacked, tag)
            if entry is None:
                continue  # acknowledged since
            try:
                message, _exchange, routing_key = wire.decode_json(entry, "unacked entry")
                if not isinstance(message, dict) or not isinstance(routing_key, str):
                    raise ValueError("not [message, exchange, routing key]")
                text = wire.dumps(message)
            except (ValueError, TypeError) as exc:
                logger.warning("kombu's unacked entry %r is left alone: %s", tag, exc)
                continue
            if routing_key not in list_keys:
                continue  # another queue's: its own consumers restore it
            if self._broker(
                scripts.celery_restore, unacked, unacked_index, list_keys[routing_key][0], tag, entry, text
            ):
                restored += 1
        if restored:
            logger.warning("gave %d unacknowledged message(s) back to their queues", restored)
        return restored

    def _take_lease(self, lease: Lease) -> None:
        """Wait for a drain killed a moment ago to let its lease expire, then hold it."""
        deadline = time.monotonic() + self.lease_seconds + 1.0
        told = False
        while not lease.acquire():
            if self.stopping.is_set():
                raise DrainError("stopped while waiting for the drain lease")
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"another drain is working on this broker (lease {lease.key!r} is held); one drain"
                    " runs per broker at a time"
                )
            if not told:
                logger.warning(
                    "waiting for the drain lease %r (another drain holds it, or one was killed)", lease.key
                )
                told = True
            self.stopping.wait(0.2)

    def _drain(self, client: redis.Redis, prefix: str, list_keys: dict[str, list[str]], lease: Lease) -> None:
        reported = time.monotonic()
        renewed = time.monotonic()
        # First what a killed drain left in hand, then the queues, round robin.
        pending = {queue: True for queue in self.queues}
        turn = 0
        while not self.stopping.is_set() and (self.limit is None or self.tally.handled < self.limit):
            now = time.monotonic()
            if now - renewed > self.lease_seconds / 3:
                if not self._broker(lease.renew):
                    raise BrokerError(
                        f"lost the drain lease {lease.key!r} (the broker was unreachable too long?)"
                    )
                renewed = now
            if now - reported > self.progress_every:
                self.progress(self.tally)
                reported = now
            taken = None
            for offset in range(len(self.queues)):
                queue = self.queues[(turn + offset) % len(self.queues)]
                held = prefix + keys.celery_drain_held(queue)
                raw = self._take(client, queue, held, list_keys[queue], pending)
                if raw is not None:
                    taken = (queue, held, raw)
                    break
            turn += 1
            if taken is None:
                if not self.follow:
                    return
                # Block a moment on one queue (in turn) for a new message, then look at all again.
                queue = self.queues[turn % len(self.queues)]
                held = prefix + keys.celery_drain_held(queue)
                waited = self._broker(client.brpoplpush, list_keys[queue][0], held, timeout=1)
                if waited is None:
                    continue
                taken = (queue, held, waited)
            queue, held, raw = taken
            self.handle(queue, raw)
            # The acknowledgement: the job (or the dead-set entry) is in wurk's Redis.
            self._broker(client.lrem, held, -1, raw)

    def _take(
        self, client: redis.Redis, queue: str, held: str, sources: list[str], pending: dict[str, bool]
    ) -> bytes | None:
        if pending[queue]:
            left: bytes | None = self._broker(client.lindex, held, -1)
            if left is not None:
                logger.warning("resuming a message a stopped drain held (queue %r)", queue)
                return left
            pending[queue] = False
        for source in sources:
            raw: bytes | None = self._broker(client.rpoplpush, source, held)
            if raw is not None:
                return raw
        return None

    def _broker(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args)`` on the broker, its failure a ``BrokerError`` that names the broker."""
        try:
            return call(*args, **kwargs)
        except RedisError as exc:
            raise BrokerError(f"the Celery broker at {redact_url(self.broker_url)} failed: {exc}") from exc

    def handle(self, queue: str, raw: bytes) -> str:
        """Make one broker message a job, or a dead-set entry; ``moved``, ``skipped`` or ``dead``.

        Raises only when wurk's Redis fails (the message stays held for the next drain).
        """
        try:
            try:
                message = decode(raw)
            except Refused:
                raise
            except Exception as exc:  # a case decode() did not foresee: still the message's fault
                raise Refused(
                    "InvalidCeleryMessage", f"cannot be read ({type(exc).__name__}: {exc})"
                ) from None
            task = self.lookup(message.task)
            if task is None:
                raise Refused(
                    "UnknownCeleryTask",
                    f"no task is registered under the Celery name {message.task!r} (id {message.id});"
                    " register it with django_wurk.celery, then push this message back onto the broker",
                )
            outcome = self._push(task, message)
        except Refused as refused:
            self._bury(queue, raw, refused)
            self.tally.dead += 1
            return "dead"
        if outcome == "moved":
            self.tally.moved += 1
        else:
            self.tally.skipped += 1
        return outcome

    def _push(self, task: Task, message: CeleryMessage) -> str:
        app = getattr(task, "app", None)
        if app is not None and app.setting("task_always_eager"):
            # apply_async would run the task here and push nothing, and the message be gone.
            raise DrainError(
                f"task {message.task!r} is set to run eagerly (task_always_eager /"
                " CELERY_TASK_ALWAYS_EAGER): the drain would run it in this process instead of queueing it;"
                " turn it off for the drain"
            )
        pusher = OncePusher(self.wurk, message.delivery)
        try:
            with capture(pusher):
                extra: dict[str, Any] = {"retries": message.retries} if message.retries else {}
                if message.chain:
                    extra["chain"] = message.chain
                if message.link:
                    extra["link"] = message.link
                if message.link_error:
                    extra["link_error"] = message.link_error
                hard, soft = message.timelimit
                if hard is not None:
                    extra["time_limit"] = hard
                if soft is not None:
                    extra["soft_time_limit"] = soft
                task.apply_async(
                    message.args,
                    message.kwargs,
                    task_id=message.id,
                    eta=message.eta,
                    expires=message.expires,
                    **extra,
                )
        except (RedisError, OSError):
            raise  # wurk's Redis: the message stays held, and the drain stops
        except Exception as exc:
            raise Refused(
                "CeleryTaskRefused",
                f"task {message.task!r} id {message.id} could not be enqueued: {type(exc).__name__}: {exc}",
            ) from None
        if pusher.already and not pusher.pushed:
            logger.warning(
                "task %r id %s was pushed before the drain stopped; acknowledged without a second push",
                message.task,
                message.id,
            )
            return "skipped"
        if not pusher.pushed:
            logger.info("task %r id %s: a client middleware dropped the push", message.task, message.id)
            return "skipped"
        return "moved"

    def _bury(self, queue: str, raw: bytes, refused: Refused) -> None:
        # The dead set is trimmed to DEAD_MAX_JOBS on every write, oldest first: past that,
        # a message kept there would push out another (maybe one this drain kept), so stop.
        limit = self.wurk.config.dead_max_jobs
        if self.wurk.redis.zcard(keys.DEAD) >= limit - 1:
            raise DeadSetFull(
                f"the dead set is full (WURK['DEAD_MAX_JOBS'] = {limit}); the message that was to go"
                f" there ({refused}) stays on the broker: deal with the dead entries or raise the limit,"
                " then drain again"
            )
        logger.warning("Celery message from queue %r goes to the dead set: %s", queue, refused)
        error = wire.PayloadError(refused.error_class, f"Celery queue {queue!r}: {refused}")
        bury(self.wurk, invalid_payload_envelope(queue, raw, error, self.wurk.config.timestamps))
