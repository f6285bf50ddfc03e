"""The writer: the one place new jobs are written to Redis.

Every route a push can take ends here: a push made now, one made at a database commit, a
row relayed from the outbox, a Celery message drained, a batch's block flushed, the outage
buffer replaying. Whatever the route, the writer is where

* the **push gates** run (``PushGate``: unique jobs' locks), at the moment of the write and
  never before, so a decision that takes something in Redis is taken only for a job that is
  really written;
* the payload gets its ``enqueued_at`` (dropped again for a scheduled push, whose time is
  the schedule entry's score);
* Sidekiq's exact commands go out: ``SADD queues`` + ``LPUSH queue:<q>`` in one pipeline, or
  ``ZADD schedule`` (the outbox and the drain write through a once-only script instead, and a
  batch through its own script, after ``ready()`` ran the same gates and stamp);
* a push that cannot reach Redis either raises ``EnqueueError`` or, with ``CLIENT_BUFFER``,
  joins the outage buffer (a ``Backlog``) and is written in order when Redis answers.

The client decides where a push goes (``client.Client.route``); the writer only writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from redis import exceptions as redis_exceptions

from django_wurk.core import keys, wire
from django_wurk.core.backlog import Backlog, BacklogFull, Fate
from django_wurk.core.client import NO_DELIVERY, ClientBufferFull, Delivery, EnqueueError, Refused
from django_wurk.core.config import redact_url
from django_wurk.core.priority import listed_for
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.priority import listed_for
from django_wurk.core.client import Engine

logger = logging.getLogger("django_wurk.client")


class PushGate(Protocol):
    """Decides, at the moment new jobs are written to Redis, which of them may be.

    Not client middleware: middleware runs when ``perform_async`` is called, which inside a
    transaction is long before the commit writes the job. A gate runs at the write itself
    (at once, after the commit, from the outage buffer or the outbox), so a decision that
    takes something in Redis (unique jobs' lock) is taken only for a job that is really
    written. It returns the payloads that may go, in order (it may add keys to them);
    the others are dropped. Promotions from the schedule and retry sets are not new jobs
    and pass no gate.
    """

    def __call__(self, payloads: list[Payload], at: float | None) -> list[Payload]: ...


class Collapsed(list[Payload]):
    """A gate's answer that also names, for jobs it dropped, the job that stands for each.

    A throttled push is dropped because another job holds its slot, a debounced one because
    the gate wrote it into its burst: either way the caller is answered the jid of that job
    (``instead``: dropped jid -> standing jid), not ``None``.
    """

    def __init__(self, payloads: list[Payload], instead: dict[str, str]) -> None:
        super().__init__(payloads)
        self.instead = instead


class StandIns(dict[str, str | None]):
    """The jids the gates refused (``Refused``), each with the jid of the job that stands
    for it, or ``None`` when none does (a unique job's duplicate)."""


def admit(
    gates: Sequence[PushGate], payloads: Sequence[Payload], at: float | None
) -> tuple[list[Payload], Refused]:
    """Run ``payloads`` through every gate: (those that may be written, the jids refused)."""
    admitted = list(payloads)
    instead: dict[str, str] = {}
    for gate in gates:
        admitted = gate(admitted, at)
        if isinstance(admitted, Collapsed):
            instead.update(admitted.instead)
    if len(admitted) == len(payloads):
        return admitted, []
    kept = {id(p) for p in admitted}
    refused = [str(p.get("jid")) for p in payloads if id(p) not in kept]
    if not instead:
        return admitted, refused
    return admitted, StandIns((jid, instead.get(jid)) for jid in refused)


class Kept:
    """A push the outage buffer keeps: what ``Writer.write`` is to be called with."""

    __slots__ = ("at", "delivery", "payloads")

    def __init__(self, payloads: list[Payload], at: float | None, delivery: Delivery) -> None:
        self.payloads = payloads
        self.at = at
        self.delivery = delivery


class Writer:
    """Writes new jobs to Redis, through the push gates, the way Sidekiq's client does.

    It is the engine's pusher unless a testing mode replaced it (``wurk.pusher``), and it
    says so: ``writes_to_redis`` is what features ask before they keep state in Redis.
    """

    #: The testing modes' pushers say False: they keep no Redis state.
    writes_to_redis = True

    def __init__(self, wurk: Engine) -> None:
        self.wurk = wurk
        #: The outage buffer (``CLIENT_BUFFER``): pushes that found Redis down, written in
        #: order by one thread as soon as it answers, for as long as it takes. A forked child
        #: starts with it empty; at exit it gets one last try, and what is left is logged.
        self.outage: Backlog[Kept] = Backlog(
            "client-buffer",
            self._replay,
            self._lost,
            limit=lambda: self.wurk.config.client_buffer,
            size=lambda kept: len(kept.payloads),
            first_delay=0.1,
            max_delay=5.0,
            on_written=self._replayed,
        )

    @property
    def buffered(self) -> int:
        """How many jobs the outage buffer holds."""
        return self.outage.size

    # A push now -----------------------------------------------------------------------

    def push(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY
    ) -> Refused:
        """Write now; the jids a gate refused. Redis down: ``EnqueueError``, or into the buffer.

        While anything is buffered a push joins the end of the buffer, so order holds.
        """
        if self.outage.size:  # busy(), without a call on every push
            self._keep(payloads, at, delivery, None)
            return None
        try:
            shard = delivery.get("shard") if delivery else None
            if shard is None:
                return self._write(payloads, at)
            with self.wurk.via(shard):
                return self._write(payloads, at)
        except (redis_exceptions.RedisError, OSError) as exc:
            if not self.wurk.config.client_buffer:
                raise EnqueueError(
                    f"could not push {len(payloads)} job(s) to Redis at "
                    f"{redact_url(self.wurk.config.redis_url)}: {exc}"
                ) from exc
            logger.error("Redis is unreachable (%s); buffering pushes in memory", exc)
            self._keep(payloads, at, delivery, exc)
            return None

    def _keep(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery, error: BaseException | None
    ) -> None:
        try:
            self.outage.submit(Kept(list(payloads), at, delivery), error)
        except BacklogFull:
            limit = self.wurk.config.client_buffer
            raise ClientBufferFull(
                f"Redis at {redact_url(self.wurk.config.redis_url)} is unreachable and the outage "
                f"buffer is full ({self.outage.size} of WURK['CLIENT_BUFFER'] = {limit}); "
                "this push was refused"
            ) from None

    def _replay(self, kept: Kept) -> None:
        self.write(kept.payloads, kept.at, kept.delivery)

    def _replayed(self, kept: Kept, attempt: int) -> None:
        if self.outage.size <= len(kept.payloads):  # the last one (it still counts until it returns)
            logger.warning("Redis is reachable again; the buffered pushes were sent")

    def _lost(self, kept: Kept, error: BaseException, fate: Fate) -> None:
        logger.error(
            "%d buffered job(s) %s (%s): %s; payloads: %r",
            len(kept.payloads),
            "may not have reached Redis" if fate == "under_way" else "never reached Redis and are lost",
            "the process is exiting" if fate in ("exiting", "under_way") else "they cannot be written",
            error,
            kept.payloads,
        )

    # The write itself -----------------------------------------------------------------

    def write(
        self, payloads: Sequence[Payload], at: float | None, delivery: Delivery = NO_DELIVERY
    ) -> Refused:
        """Write to Redis, or raise: no buffer. The delivery's ``shard`` says where (a push
        deferred to a commit or buffered in an outage comes here outside the caller's ``via()``)."""
        shard = delivery.get("shard") if delivery else None
        if shard is None:
            return self._write(payloads, at)
        with self.wurk.via(shard):
            return self._write(payloads, at)

    def _write(self, payloads: Sequence[Payload], at: float | None) -> Refused:
        commands, written, refused = self._commands(payloads, at)
        if written:
            self._send(commands, written)
        return refused

    def _commands(
        self, payloads: Sequence[Payload], at: float | None
    ) -> tuple[list[tuple[Any, ...]], int, Refused]:
        """Through the gates, then Sidekiq's commands for what may be written: (the commands,
        how many jobs they write, the jids the gates refused)."""
        refused: Refused = []
        gates = self.wurk.push_gates
        if gates and payloads:
            payloads, refused = admit(gates, payloads, at)
        if not payloads:
            return [], 0, refused
        config = self.wurk.config
        commands: list[tuple[Any, ...]] = []
        if at is None:
            # One enqueued_at for the whole group, as Sidekiq stamps a bulk push.
            stamp = wire.now_stamp(config.timestamps)
            by_queue: dict[str, list[Payload]] = {}
            for payload in payloads:
                payload["enqueued_at"] = stamp
                # A job of another priority than 0 waits in its queue's priority list (core/priority.py).
                queue = payload["queue"]
                if "priority" in payload:
                    queue = listed_for(queue, payload)
                by_queue.setdefault(queue, []).append(payload)
            for queue, group in by_queue.items():
                commands.append(("SADD", keys.QUEUES, queue))
                if len(group) == 1:  # a single push: nothing shared to encode once
                    commands.append(("LPUSH", keys.queue(queue), wire.dumps(group[0])))
                else:
                    commands.append(("LPUSH", keys.queue(queue), *wire.dumps_alike(group)))
        else:
            score = repr(at)
            members: list[Any] = []
            for payload in payloads:
                payload.pop("enqueued_at", None)
            for entry in wire.dumps_alike(payloads):
                members += (score, entry)
            commands.append(("ZADD", keys.SCHEDULE, *members))
        return commands, len(payloads), refused

    def _send(self, commands: list[tuple[Any, ...]], written: int) -> None:
        """Send ``commands`` (writing ``written`` jobs) in one round trip on this thread's Line,
        with ``WAIT`` for ``PUSH_WAIT_REPLICAS`` when set."""
        config = self.wurk.config
        replicas = config.push_wait_replicas
        if not replicas:
            self.wurk.lines.get().pipeline(commands)
            return
        # WAIT on the same connection, in the same round trip: it returns once that many
        # replicas have every write sent before it (these pushes), or at the timeout.
        timeout = config.push_wait_timeout
        commands.append(("WAIT", replicas, max(1, int(timeout * 1000))))
        confirmed = self.wurk.lines.get().pipeline(commands)[-1]
        if not isinstance(confirmed, int) or confirmed < replicas:
            logger.warning(
                "pushed %d job(s), but only %s of WURK['PUSH_WAIT_REPLICAS'] = %d replicas had them "
                "within %s s: a failover now could lose them",
                written,
                confirmed,
                replicas,
                timeout,
            )

    # Jobs of several times at once ----------------------------------------------------

    def push_timed(self, groups: Sequence[tuple[float | None, list[Payload]]], delivery: Delivery) -> Refused:
        """``push`` for several groups of jobs, each with its own time, in one round trip: a
        bulk push with a time per job (``perform_bulk(spread_interval=...)``), where a push
        per time would cost a round trip each. Each group passes the gates as its own push;
        the refusals of all come back together. Redis down: as ``push`` (each group kept)."""
        if self.outage.size:
            for at, payloads in groups:
                self._keep(payloads, at, delivery, None)
            return None
        try:
            shard = delivery.get("shard") if delivery else None
            if shard is None:
                return self._write_timed(groups)
            with self.wurk.via(shard):
                return self._write_timed(groups)
        except (redis_exceptions.RedisError, OSError) as exc:
            count = sum(len(payloads) for _, payloads in groups)
            if not self.wurk.config.client_buffer:
                where = redact_url(self.wurk.config.redis_url)
                raise EnqueueError(f"could not push {count} job(s) to Redis at {where}: {exc}") from exc
            logger.error("Redis is unreachable (%s); buffering pushes in memory", exc)
            for at, payloads in groups:
                self._keep(payloads, at, delivery, exc)
            return None

    def _write_timed(self, groups: Sequence[tuple[float | None, list[Payload]]]) -> Refused:
        commands: list[tuple[Any, ...]] = []
        written = 0
        stands = StandIns()
        for at, payloads in groups:
            more, count, refused = self._commands(payloads, at)
            commands += more
            written += count
            if refused:
                stands.update(refused if isinstance(refused, StandIns) else dict.fromkeys(refused))
        if written:
            self._send(commands, written)
        return stands

    def ready(self, jobs: list[tuple[Payload, float | None]]) -> list[tuple[Payload, float | None]]:
        """The jobs the gates let through (each group of one time asked once), in order, with
        their ``enqueued_at``: for a write another script makes (a batch's flush)."""
        gates = self.wurk.push_gates
        if gates:
            by_time: dict[float | None, list[Payload]] = {}
            for payload, at in jobs:
                by_time.setdefault(at, []).append(payload)
            kept: set[int] = set()
            for at, payloads in by_time.items():
                admitted, _ = admit(gates, payloads, at)
                kept.update(id(p) for p in admitted)
            jobs = [(payload, at) for payload, at in jobs if id(payload) in kept]
        stamp = wire.now_stamp(self.wurk.config.timestamps)
        for payload, at in jobs:
            if at is None:
                payload["enqueued_at"] = stamp
            else:
                payload.pop("enqueued_at", None)
        return jobs

    def write_once(
        self, marker: str, payload: Payload, at: float | None, ttl: int = keys.OUTBOX_MARKER_TTL
    ) -> bool | None:
        """Write ``payload`` unless ``marker`` shows it was written before; True if this call did.

        The outbox relay's step (and the Celery drain's): atomic with the marker, kept ``ttl``
        seconds, so retries after a crash never duplicate a job. ``None``: a push gate refused
        the job (a unique job's duplicate), so nothing was written. No buffer: the caller
        keeps what is not written (an outbox row, a broker message).
        """
        admitted = self.ready([(dict(payload), at)])
        if not admitted:
            return None
        ready = admitted[0][0]
        queue = listed_for(str(ready.get("queue") or "default"), ready)
        jid = str(ready.get("jid") or "")
        return self.wurk.scripts.push_once(marker, ttl, queue, wire.dumps(ready), at, jid)
