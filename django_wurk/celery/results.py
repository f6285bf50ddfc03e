"""Task results, stored where and how Celery's Redis result backend stores them.

Each result is one string key, ``celery-task-meta-<task id>``, holding kombu JSON:
``{"status", "result", "traceback", "children", "date_done", "task_id"}``, with an expiry
(``result_expires``, one day by default), and each write is also PUBLISHed on a channel of
the key's name. So a Celery ``AsyncResult`` configured with this Redis as its result
backend reads these records, and ``get()`` here waits on the channel instead of polling.

A failure is stored as ``{"exc_type", "exc_message", "exc_module"}``, never pickled. Reading
it back re-creates the exception only from a class already imported in this process that
is an ``Exception`` (as Celery refuses non-exceptions); anything else becomes a
``RemoteTaskError`` subclass named like the original, with the message.

Everything read here may be any bytes another program wrote: an unreadable record reads
as PENDING, and an unusable failure as a ``RemoteTaskError``.
"""

from __future__ import annotations

import sys
import time
import traceback as traceback_module
from datetime import UTC, datetime
from typing import Any

from django_wurk.celery import codec, states
from django_wurk.celery.exceptions import RemoteTaskError, TaskRevokedError, TimeoutError
from django_wurk.core.engine import Wurk, wurk

#: Celery's key prefix; the rest of the key is the task id (the job's jid).
KEY_PREFIX = "celery-task-meta-"
#: Celery's ``result_expires`` default: a finished result is kept one day.
DEFAULT_EXPIRES = 24 * 3600
#: A record longer than this is not decoded (it is somebody else's data, or an accident).
MAX_RECORD_BYTES = 64 * 1024 * 1024


def result_key(task_id: str) -> str:
    return KEY_PREFIX + task_id


def exception_info(exc: BaseException) -> dict[str, Any]:
    """A failure as Celery's JSON backends store it."""
    kind = type(exc)
    try:
        message = codec.encode(list(exc.args))
    except (TypeError, ValueError):
        message = [str(a) for a in exc.args]
    return {"exc_type": kind.__qualname__, "exc_message": message, "exc_module": kind.__module__}


def rebuild_exception(info: Any) -> BaseException:
    """The exception a stored failure describes, without importing or unpickling anything."""
    if not isinstance(info, dict):
        return RemoteTaskError(str(info))
    name = info.get("exc_type")
    module = info.get("exc_module")
    message = info.get("exc_message", "")
    args = tuple(message) if isinstance(message, list) else (message,)
    cls: Any = None
    if isinstance(name, str) and isinstance(module, str) and module in sys.modules:
        cls = sys.modules[module]
        for part in name.split("."):
            cls = getattr(cls, part, None)
            if cls is None:
                break
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            rebuilt: BaseException = cls(*args)
            return rebuilt
        except Exception:
            pass  # a constructor with other arguments: fall through to the generic one
    label = name if isinstance(name, str) and name.isidentifier() else "RemoteTaskError"
    generic = type(label, (RemoteTaskError,), {"__module__": module if isinstance(module, str) else __name__})
    error: RemoteTaskError = generic(*[a if isinstance(a, str) else repr(a) for a in args])
    return error


class ResultStore:
    """Writes and reads result records for one engine (the global ``wurk`` by default)."""

    def __init__(self, engine: Wurk = wurk) -> None:
        self.wurk = engine

    def write(
        self,
        task_id: str,
        status: str,
        result: Any = None,
        traceback: str | None = None,
        expires: int | None = DEFAULT_EXPIRES,
    ) -> None:
        done = datetime.now(UTC).isoformat() if status in states.READY_STATES else None
        meta = {
            "status": status,
            "result": result,
            "traceback": traceback,
            "children": [],
            "date_done": done,
            "task_id": task_id,
        }
        try:
            text = codec.dumps(meta)
        except (TypeError, ValueError) as exc:
            # A return value JSON cannot carry: the task ran, so say what it returned instead.
            meta["result"] = {"unencodable_result": repr(result)[:1000], "error": str(exc)}
            text = codec.dumps(meta)
        key = result_key(task_id)
        pipe = self.wurk.redis.pipeline(transaction=True)
        if expires:
            pipe.set(key, text, ex=int(expires))
        else:
            pipe.set(key, text)
        pipe.publish(key, text)
        pipe.execute()

    def success(self, task_id: str, value: Any, expires: int | None) -> None:
        self.write(task_id, states.SUCCESS, value, expires=expires)

    def failure(self, task_id: str, exc: BaseException, status: str, expires: int | None) -> None:
        trace = "".join(traceback_module.format_exception(exc))
        self.write(task_id, status, exception_info(exc), trace, expires=expires)

    def read(self, task_id: str) -> dict[str, Any]:
        """The record of ``task_id``; ``{"status": "PENDING"}`` when there is none (or it is garbage)."""
        raw = self.wurk.redis.get(result_key(task_id))
        return parse(raw)

    def forget(self, task_id: str) -> None:
        self.wurk.redis.delete(result_key(task_id))


def parse(raw: bytes | None) -> dict[str, Any]:
    pending: dict[str, Any] = {"status": states.PENDING, "result": None, "traceback": None}
    if raw is None or len(raw) > MAX_RECORD_BYTES:
        return pending
    try:
        meta = codec.loads(raw)
    except Exception:  # kombu's decoder raises what its envelopes' constructors raise
        return pending
    if not isinstance(meta, dict) or meta.get("status") not in states.ALL_STATES:
        return pending
    return meta


class AsyncResult:
    """A task's outcome by id, as Celery's ``AsyncResult``: ``state``, ``result``, ``get()``..."""

    def __init__(self, id: str, task_name: str | None = None, store: ResultStore | None = None) -> None:
        if not isinstance(id, str) or not id:
            raise ValueError(f"a task id must be a non-empty string, got {id!r}")
        self.id = id
        self.task_name = task_name
        self._store = store
        #: The result before this one in a chain, or a chord's header (a ``GroupResult``).
        self.parent: Any = None

    @property
    def store(self) -> ResultStore:
        return self._store or ResultStore()

    @property
    def task_id(self) -> str:
        return self.id

    def _meta(self) -> dict[str, Any]:
        return self.store.read(self.id)

    @property
    def state(self) -> str:
        return str(self._meta()["status"])

    @property
    def status(self) -> str:
        return self.state

    @property
    def result(self) -> Any:
        """The return value, or the exception for FAILURE, RETRY and REVOKED (as Celery)."""
        return self._value(self._meta())

    @property
    def info(self) -> Any:
        return self.result

    @property
    def traceback(self) -> str | None:
        trace = self._meta().get("traceback")
        return trace if isinstance(trace, str) else None

    @property
    def date_done(self) -> datetime | None:
        done = self._meta().get("date_done")
        try:
            return datetime.fromisoformat(done) if isinstance(done, str) else None
        except ValueError:
            return None

    def ready(self) -> bool:
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    def exists(self) -> bool:
        """True once a worker wrote something for this id (Celery 5.7's check)."""
        return bool(self.store.wurk.redis.exists(result_key(self.id)))

    def revoke(
        self, connection: Any = None, terminate: bool = False, signal: Any = None,
        wait: bool = False, timeout: float | None = None,
    ) -> None:  # fmt: skip
        """Cancel the task (``django_wurk.celery.control``); with ``wait``, wait for its result
        to say REVOKED (or any other end) for up to ``timeout`` seconds."""
        from django_wurk.celery.control import revoke

        revoke(self.id, terminate=terminate, signal=signal)
        if wait:
            self._wait(timeout, 0.1)

    def forget(self) -> None:
        self.store.forget(self.id)

    def get(
        self,
        timeout: float | None = None,
        propagate: bool = True,
        interval: float = 0.5,
        disable_sync_subtasks: bool = True,
        **_ignored: Any,
    ) -> Any:
        """Wait for the result; re-raise the task's error (``propagate``); ``TimeoutError`` on time out.

        Waits on the result's Redis channel (a worker PUBLISHes each write), so no polling
        loop runs; ``interval`` bounds each wait, in case a message is missed.
        """
        meta = self._wait(timeout, interval)
        value = self._value(meta)
        if propagate and meta["status"] in states.PROPAGATE_STATES:
            raise value
        return value

    wait = get

    def _wait(self, timeout: float | None, interval: float) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        key = result_key(self.id)
        pubsub = self.store.wurk.redis.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(key)  # before the first read: a write in between is not missed
            while True:
                meta = self._meta()
                if meta["status"] in states.READY_STATES:
                    return meta
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"the operation timed out waiting for task {self.id}")
                wait = max(interval, 0.05) if remaining is None else min(max(interval, 0.05), remaining)
                pubsub.get_message(timeout=wait)
        finally:
            pubsub.close()

    def _value(self, meta: dict[str, Any]) -> Any:
        status = meta["status"]
        if status in (states.FAILURE, states.RETRY):
            return rebuild_exception(meta.get("result"))
        if status == states.REVOKED:
            return TaskRevokedError(f"task {self.id} expired before it ran")
        return meta.get("result")

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"

    def __str__(self) -> str:
        return self.id

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AsyncResult):
            return other.id == self.id
        if isinstance(other, str):
            return other == self.id
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.id)
