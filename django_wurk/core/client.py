"""The client: turn payloads into jobs, and decide where each push goes.

A push runs the client middleware chain, then makes one routing decision (``Client.route``)
and hands the surviving payloads to what it chose:

* an open batch ``jobs()`` block (or the Celery drain) that captures this context's pushes;
* a testing mode's pusher (``testing.fake()``/``inline()``), which took the writer's place;
* the host's transaction (``Deferral``: the Django app defers a push to the commit, or
  writes it to the outbox), whose later write goes through the writer too;
* the writer (``core/writer.py``), now.

So every job that reaches Redis is written by the one writer, which runs the push gates and
the outage buffer, and the rest of the client is identical in tests and in production.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from redis import Redis
from redis import exceptions as redis_exceptions

from django_wurk.core import priority, wire
from django_wurk.core.config import Config
from django_wurk.core.connection import ThreadLines
from django_wurk.core.middleware import Chain
from django_wurk.core.scripts import Scripts, promote_each
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.writer import PushGate, Writer


#: Options a caller gives for one push that say how to deliver it, not what the job is:
#: handed to the pusher and never stored (Sidekiq 8 treats ``pool`` and ``sync`` so). The
#: engine does not read them; the layer whose pusher does declares them
#: (``django_wurk.core.job.declare_delivery_option``): the Django app's ``using`` and ``on_commit``.
Delivery = Mapping[str, Any]
NO_DELIVERY: Delivery = {}


_ARTICLE = {"int": "an int"}


def promoted_queue(payload: Payload) -> str:
    """The queue a sorted-set entry is promoted to: its ``queue``, ``default`` when it has none,
    or that queue's list for the entry's ``priority`` (``core/priority.py``).

    A ``queue`` that is not a string (a list, a number, an object, written by another
    producer) names no queue: any text made of it (``"['default']"``, Ruby's ``"5"``) is a list
    no worker reads, and the job would wait there unseen. So it is refused with the reason
    (``PayloadError``; the poller buries the entry), never guessed.
    """
    queue = payload.get("queue")
    if queue is None or queue == "":
        return priority.listed_for("default", payload)
    if not isinstance(queue, str):
        kind = type(queue).__name__
        raise wire.PayloadError(
            "InvalidPayload", f"payload 'queue' is {_ARTICLE.get(kind, 'a ' + kind)}, not a queue name"
        )
    return priority.listed_for(queue, payload)


#: What a pusher may answer: the jids a gate refused at the moment of the write (see
#: ``PushGate``). ``None`` (or empty) when every job was written, or when the write was
#: deferred (a transaction's commit, the outage buffer) and nobody knows yet. A mapping
#: (``writer.StandIns``) also names, for each refused jid, the job that stands for it (a
#: throttle's holder, a debounce's burst), which the caller gets instead of ``None``.
Refused = Collection[str] | None


class Pusher(Protocol):
    """Takes the jobs of a push: the writer, a testing mode, a batch block, the Celery drain."""

    def push(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY
    ) -> Refused: ...


#: Where one push goes: a pusher's ``push``, or a route the ``Deferral`` chose.
Route = Callable[[Sequence[Payload], float | None, Delivery], Refused]


class Deferral(Protocol):
    """What the host application (the Django app) decides about pushes made in its
    transactions: the engine knows nothing of databases, so it asks.

    ``route`` answers for one push: ``None`` to write it now, or the route that keeps it
    for later (at the commit, in the outbox); that route writes through the writer in the
    end. ``defer`` is the same rule for a write that is not a push (a batch's flush): True
    when it was taken to run at the commit, False when it should run now.
    """

    def route(self, delivery: Delivery) -> Route | None: ...

    def defer(self, action: Callable[[], None]) -> bool: ...


def writes_to_redis(wurk: Engine) -> bool:
    """False under the testing modes (``fake()``/``inline()``), which keep no Redis state.

    Features that count something in Redis beside the push (batches, expired jobs) ask
    this first. The engine's pusher says what it is (``writes_to_redis``); one that does not
    say (a test's own recorder) is taken to keep no Redis state.
    """
    return getattr(wurk.pusher, "writes_to_redis", False) is True


class WriteGroup:
    """Pushes written as one, though not in one call: a transaction's, at its commit (each
    push made in it is its own ``on_commit`` callback), or an outbox relay pass.

    A gate sees each write of the group in turn, so it keeps what it must remember across
    them here, under its own key in ``memory``: unique jobs keep the locks asked for, so the
    second identical push of a transaction is a duplicate at the commit even when the first
    has run and released its lock in the meantime, as it is within one ``perform_bulk``.
    """

    __slots__ = ("memory",)

    def __init__(self) -> None:
        self.memory: dict[str, Any] = {}


_write_group: ContextVar[WriteGroup | None] = ContextVar("django_wurk_write_group", default=None)

#: The ``WriteGroup`` this context's pushes belong to, if any (for push gates).
write_group: Callable[[], WriteGroup | None] = _write_group.get


@contextmanager
def written_together(group: WriteGroup | None = None) -> Iterator[WriteGroup]:
    """Make this context's pushes part of ``group``; without one, of the group open already
    (a relay pass inside a commit stays in the commit's group), or of a new one."""
    chosen = group or _write_group.get() or WriteGroup()
    token = _write_group.set(chosen)
    try:
        yield chosen
    finally:
        _write_group.reset(token)


#: Where ``Client.push``/``push_bulk`` send jobs in this context instead of the engine's
#: pusher (a batch's open ``jobs()`` block collects them, to write them all at once).
_capture: ContextVar[Pusher | None] = ContextVar("django_wurk_capture", default=None)


#: The shard a ``Wurk.via()`` block chose for this context (``None``: the process's own).
via_context: ContextVar[str | None] = ContextVar("django_wurk_shard", default=None)


#: What collects the pushes made in this context, if anything does: the ContextVar's own
#: ``get``, called on every push by the batch middleware, so no Python frame of ours.
capturing: Callable[[], Pusher | None] = _capture.get


@contextmanager
def capture(target: Pusher | None) -> Iterator[None]:
    """Send this context's new pushes to ``target`` (``None``: to the pusher, as usual).

    Only new jobs are captured: promotions (retries, scheduled jobs, a dead job retried)
    and inline runs clear the capture for their own middleware pass.
    """
    token = _capture.set(target)
    try:
        yield
    finally:
        _capture.reset(token)


class Engine(Protocol):
    """The parts of the engine (``engine.Wurk``) the client reads.

    Named here rather than imported: the engine is built from the client, so the client
    sits below it, and this says exactly what a push depends on.
    """

    @property
    def config(self) -> Config: ...

    @property
    def lines(self) -> ThreadLines: ...

    @property
    def redis(self) -> Redis: ...

    @property
    def scripts(self) -> Scripts: ...

    @property
    def client_middleware(self) -> Chain: ...

    @property
    def pusher(self) -> Pusher: ...

    @property
    def writer(self) -> Writer: ...

    @property
    def deferral(self) -> Deferral | None: ...

    @property
    def push_gates(self) -> list[PushGate]: ...

    @property
    def shard(self) -> str: ...

    def via(self, shard: str | None) -> AbstractContextManager[Any]: ...


class ShardMismatch(ValueError):
    """A push inside a batch's ``jobs()`` block names another shard than the batch's."""


def with_shard(delivery: Delivery) -> Delivery:
    """``delivery`` naming the shard a ``via()`` block chose, when it names none itself, so a
    push deferred to a commit or buffered in an outage lands there too, outside the block."""
    if delivery and delivery.get("shard") is not None:
        return delivery
    shard = via_context.get()
    return delivery if shard is None else {**delivery, "shard": shard}


def on_shard(wurk: Engine, delivery: Delivery) -> AbstractContextManager[Any]:
    """The block a push runs in: its ``shard`` delivery option's, or the current shard.

    The whole push runs there, client middleware included, so a unique lock, a limiter's
    count and a batch's bookkeeping live on the same Redis as the job itself.
    """
    shard = delivery.get("shard")
    if shard is None or not writes_to_redis(wurk):
        # The testing modes keep jobs in memory: one place, whatever the shard (and a test's
        # settings need not name the production shards).
        return nullcontext()
    if _capture.get() is not None and shard != wurk.shard:
        raise ShardMismatch(
            f"this push goes to shard {shard!r} but the open batch block writes to shard {wurk.shard!r}: "
            "a batch and all its jobs live on one shard (open the batch inside wurk.via(...) of that shard)"
        )
    return wurk.via(shard)


class EnqueueError(redis_exceptions.ConnectionError):
    """A push could not reach Redis (and no outage buffer took it)."""


class ClientBufferFull(EnqueueError):
    """The outage buffer is full: this push was refused, earlier buffered ones are kept."""


class Client:
    def __init__(self, wurk: Engine) -> None:
        self.wurk = wurk

    def prepare(
        self,
        payload: Payload,
        created_at: float | int | None = None,
        at: float | None = None,
        jid: str | None = None,
        owned: bool = False,
    ) -> Payload | None:
        """Give the payload its jid (``jid``, or a new one) and creation time, then run the
        client middleware.

        A scheduled push's ``at`` is in the payload while the middleware runs, as in
        Sidekiq's client (expiring jobs count from it), and taken out again afterwards: the
        schedule set keeps it as the entry's score, not in the job. The payload is copied
        first unless the caller ``owned`` it (built it for this push alone).
        """
        if not owned:
            payload = dict(payload)
        if not payload.get("jid"):
            payload["jid"] = jid or wire.new_jid()
        if "created_at" not in payload:
            payload["created_at"] = created_at or wire.now_stamp(self.wurk.config.timestamps)
        chain = self.wurk.client_middleware
        if chain.empty:
            return payload
        if at is not None:
            payload["at"] = at
        # A promoted entry another producer wrote may have no queue: it goes to "default".
        queue = str(payload.get("queue") or "default")
        result: Payload | None = chain.invoke(lambda: payload, payload["class"], payload, queue)
        if at is not None and result is not None:
            result.pop("at", None)
        return result

    def push(
        self, payload: Payload, at: float | None = None, delivery: Delivery = NO_DELIVERY, owned: bool = False
    ) -> str | None:
        """Push one job now (``at`` None) or into the schedule; ``None`` if middleware dropped it.

        ``owned``: the caller built ``payload`` for this push alone, so it is completed in
        place instead of copied (``Setter`` does, on every ``perform_async``).
        """
        delivery = with_shard(delivery)
        if delivery.get("shard") is None:
            # The usual push: no shard to enter, and no context manager's two calls for it.
            prepared = self.prepare(payload, at=at, owned=owned)
            if prepared is None:
                return None
            refused = self.route(delivery)([prepared], at, delivery)
        else:
            with on_shard(self.wurk, delivery):
                prepared = self.prepare(payload, at=at, owned=owned)
                if prepared is None:
                    return None
                refused = self.route(delivery)([prepared], at, delivery)
        jid: str = prepared["jid"]
        if not refused or jid not in refused:
            return jid
        return refused.get(jid) if isinstance(refused, Mapping) else None  # writer.StandIns

    def route(self, delivery: Delivery) -> Route:
        """The one decision of where a push goes, made once per ``push``/``push_bulk``.

        In this order: what captures this context's pushes (a batch's open ``jobs()`` block,
        the Celery drain); a testing mode's pusher, which took the writer's place and takes
        every push; the host's transaction (``Deferral``: at its commit, or its outbox);
        else the writer, now. Every route that reaches Redis reaches it through the writer.
        """
        captured = _capture.get()
        if captured is not None:
            return captured.push
        wurk = self.wurk
        pusher = wurk.pusher
        if pusher is wurk.writer and wurk.deferral is not None:
            later = wurk.deferral.route(delivery)
            if later is not None:
                return later
        return pusher.push

    def promote(self, key: str, member: bytes, payload: Payload) -> bool:
        """Move one sorted-set entry onto its queue atomically, as a normal push.

        The payload gets a fresh ``enqueued_at`` and passes the client middleware; then one
        Lua script removes ``member`` from ``key`` and pushes the result, so the entry is
        never lost between the two steps and, if two callers race, only one pushes it.
        Returns False when the entry was already gone (or middleware dropped the push).
        """
        return self.move(key, member, payload, self.promotion(payload))

    def promotion(self, payload: Payload) -> Payload | None:
        """What promoting ``payload`` pushes: a fresh ``enqueued_at``, through the client middleware.

        A step of its own so the poller can tell a middleware that fails (leave the entry
        for the next pass) from an entry that cannot be written (bury it).
        """
        payload = dict(payload)
        payload["enqueued_at"] = wire.now_stamp(self.wurk.config.timestamps)
        with capture(None):
            return self.prepare(payload)

    def move(self, key: str, member: bytes, payload: Payload, prepared: Payload | None) -> bool:
        """The rest of ``promote``: ``member`` leaves ``key`` and ``prepared`` joins its queue, in one step.

        ``prepared`` is the ``promotion`` of ``payload`` (``None``: middleware dropped it,
        and the entry is only removed). Raises ``wire.PayloadError`` if it cannot be encoded.
        """
        queue = promoted_queue(prepared or payload)
        body = wire.dumps(prepared) if prepared is not None else ""
        moved = self.wurk.scripts.promote(key, member, queue, body)
        return moved and prepared is not None

    def move_each(self, key: str, entries: Sequence[tuple[bytes, Payload, Payload | None]]) -> list[Any]:
        """``move`` for each ``(member, payload, prepared)``, in one round trip; each move is
        still atomic on its own, so racing callers move an entry once.

        One reply per entry, in order: a bool as ``move`` returns it, or the exception that
        entry met, returned rather than raised so it cannot hide what the others did:
        ``wire.PayloadError`` when it names no queue (nothing sent), a ``ResponseError``
        (WRONGTYPE) when its queue key is not a list (nothing changed).
        """
        out: list[Any] = [None] * len(entries)
        moves: list[tuple[bytes, str, str]] = []
        sent: list[int] = []
        for i, (member, payload, prepared) in enumerate(entries):
            try:
                queue = promoted_queue(prepared or payload)
            except wire.PayloadError as exc:
                out[i] = exc
                continue
            moves.append((member, queue, wire.dumps(prepared) if prepared is not None else ""))
            sent.append(i)
        replies = promote_each(self.wurk.redis, key, moves) if moves else []
        for i, reply in zip(sent, replies, strict=True):
            out[i] = reply if isinstance(reply, Exception) else bool(reply) and entries[i][2] is not None
        return out

    def push_bulk(
        self,
        payloads: Sequence[Payload],
        at: float | Sequence[float | None] | None = None,
        batch_size: int = 1000,
        delivery: Delivery = NO_DELIVERY,
        owned: bool = False,
    ) -> list[str | None]:
        """Push many jobs, one pipeline per ``batch_size`` slice; jids in input order.

        ``at``: one time for every job, or one per job (``None``: now), as Sidekiq 8's
        ``push_bulk`` takes it. A slice is written in one round trip, its times included
        (``Writer.push_timed``); routed elsewhere (a transaction's commit, a batch's block, a
        testing mode) a slice of different times goes as one push per time.
        ``owned``: as for ``push``, the payloads were built for this push alone.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if isinstance(at, Sequence) and len(at) != len(payloads):
            raise ValueError(f"push_bulk: {len(at)} times for {len(payloads)} jobs (one 'at' per job)")
        delivery = with_shard(delivery)
        with on_shard(self.wurk, delivery):
            return self._push_bulk(payloads, at, batch_size, delivery, owned)

    def _push_bulk(
        self,
        payloads: Sequence[Payload],
        at: float | Sequence[float | None] | None,
        batch_size: int,
        delivery: Delivery,
        owned: bool,
    ) -> list[str | None]:
        jids: list[str | None] = []
        push = self.route(delivery)
        prepare = self.prepare
        each: Sequence[float | None] | None = at if isinstance(at, Sequence) else None
        single: float | None = None if isinstance(at, Sequence) else at
        for start in range(0, len(payloads), batch_size):
            # One creation time per batch, as Sidekiq's push_bulk stamps it.
            created_at = wire.now_stamp(self.wurk.config.timestamps)
            first = len(jids)
            chunk = payloads[start : start + batch_size]
            times = each[start : start + batch_size] if each is not None else [single] * len(chunk)
            # Jobs by the time they are pushed for, in order (one group when ``at`` is one time).
            groups: dict[float | None, list[Payload]] = {}
            for payload, jid, when in zip(chunk, wire.new_jids(len(chunk)), times, strict=True):
                prepared = prepare(payload, created_at, when, jid, owned)
                jids.append(prepared["jid"] if prepared is not None else None)
                if prepared is not None:
                    groups.setdefault(when, []).append(prepared)
            stands: dict[str, str | None] = {}
            if len(groups) > 1 and push == self.wurk.writer.push:
                # A time per job, written now: every time in one round trip, as Sidekiq's ZADD.
                answers: list[Refused] = [self.wurk.writer.push_timed(list(groups.items()), delivery)]
            else:
                answers = [push(ready, when, delivery) for when, ready in groups.items()]
            for refused in answers:
                if refused:
                    stands.update(refused if isinstance(refused, Mapping) else dict.fromkeys(refused))
            if stands:
                jids[first:] = [stands.get(jid) if jid in stands else jid for jid in jids[first:]]
        return jids
