"""How encryption plugs into the engine: a client and a server middleware.

* Client middleware, the first of the chain so that it acts last: once every other client
  middleware has seen the plaintext (a unique-jobs digest, a batch's bid), it seals the
  last argument of a payload that says ``encrypt: true``, just before the wire. A payload
  whose last argument is already sealed (a retry, a scheduled job, a dead job retried) is
  pushed as it is: re-pushes keep the envelope.
* Server middleware, the last of the chain at install: it opens the argument for the run
  of ``perform`` only and puts the envelope back afterwards, so the middleware around it,
  the error handlers, the retry and dead sets and the logs see the envelope. An exception
  coming out of ``perform`` loses its message (it may quote the secret) before anything
  else sees it.

An envelope that cannot be opened raises ``UndecryptableJob``: the retry handler buries the
job in the dead set at once, envelope intact, with the reason.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from django_wurk.core import activejob
from django_wurk.core.feature import Plug
from django_wurk.core.features.encryption.envelope import (
    EncryptionError,
    UndecryptableJob,
    is_envelope,
    open_envelope,
    seal,
)
from django_wurk.core.features.encryption.settings import EncryptionSettings
from django_wurk.core.wire import Payload

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk
    from django_wurk.core.job import Job

#: What an encrypted job's exception says instead of its own message.
HIDDEN = "[message hidden: the job's last argument is encrypted]"


class EncryptedJobError(Exception):
    """Stands in for an exception whose message could not be hidden in place."""


def wants_encryption(payload: Payload) -> bool:
    return payload.get("encrypt") is True


class EncryptionClientMiddleware:
    #: Acts only on an ``encrypt`` payload; adds no key (it seals the last argument in place).
    client_keys = ("encrypt",)
    adds_keys: frozenset[str] = frozenset()

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(
        self, job_class: str, payload: Payload, queue: str, call_next: Callable[[], Payload | None]
    ) -> Payload | None:
        result = call_next()
        if result is None or not wants_encryption(result):
            return result
        args = result.get("args")
        if isinstance(args, list) and args and is_envelope(args[-1]):
            return result
        keys = self.wurk.config.section(EncryptionSettings)
        version = keys.version
        key = keys.key(version) if version else None
        problem = _unsealable(job_class, result, key)
        if problem is not None:
            if "enqueued_at" in result:
                # A promotion (a retry, a scheduled job, a dead job retried) of an entry another
                # producer wrote: refusing would leave it in its set for ever, and it is in Redis
                # already. It goes on as it is, and the worker buries it with the reason.
                return result
            raise EncryptionError(problem)
        assert key is not None and isinstance(args, list)
        sealed = seal(args[-1], version, key, str(result.get("jid", "")), str(result.get("class", "")))
        result["args"] = [*args[:-1], sealed]
        return result


def _unsealable(job_class: str, payload: Payload, key: bytes | None) -> str | None:
    """Why the last argument of ``payload`` cannot be sealed, or None."""
    args = payload.get("args")
    if not isinstance(args, list) or not args:
        return f"{job_class}: an encrypt=True job needs an argument to encrypt (the last one)"
    if payload.get("class") in activejob.WRAPPERS:
        return f"{job_class}: encrypt=True is not supported for ActiveJob-shaped jobs"
    if key is None:
        return (
            f"{job_class} is an encrypt=True job but WURK['ENCRYPTION_KEYS'] is empty; "
            "nothing is pushed unencrypted"
        )
    return None


class EncryptionServerMiddleware:
    payload_keys = ("encrypt",)

    def __init__(self, wurk: Wurk) -> None:
        self.wurk = wurk

    def __call__(self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
        if not wants_encryption(payload):
            call_next()
            return
        args = payload.get("args")
        if not isinstance(args, list) or not args:
            raise UndecryptableJob("the job says encrypt: true but has no argument to decrypt")
        if payload.get("class") in activejob.WRAPPERS:
            raise UndecryptableJob("encrypt: true is not supported for ActiveJob-shaped jobs")
        stored = list(args)
        # Opened in place, in the list the job is called with, and closed again whatever
        # happens (even if the job changed that list): the payload handed on to error
        # handlers and the retry handler is sealed.
        args[-1] = open_envelope(
            stored[-1],
            self.wurk.config.section(EncryptionSettings).key,
            payload.get("jid"),
            payload.get("class"),
        )
        failure: Exception | None = None
        try:
            call_next()
        except Exception as exc:
            failure = exc
        finally:
            args[:] = stored
        if failure is not None:
            concealed = conceal(failure)
            # This frame outlives the raise in the traceback, and reporters read its locals:
            # the original exception (its attributes, its chain) must not be one of them.
            failure = None
            # Raised outside the except block, so the new exception carries no context.
            raise concealed


#: The class attribute naming the attributes an exception keeps when concealed.
KEPT = "kept_when_encrypted"


def conceal(exc: Exception) -> Exception:
    """A copy of ``exc`` that holds nothing the job had: the route out of an encrypted job.

    The copy is a new instance of the same class (``retry_in`` and error reporting may
    depend on it), made without calling its ``__init__``: its only argument is ``HIDDEN``,
    and it has no attributes (whatever the job set: ``e.card = ...``, nested or not), no
    built-in fields (``OSError.filename``, ``AttributeError.obj``), no chained exceptions
    and no notes. An exception group's members are concealed the same way. The attributes a
    class names in ``kept_when_encrypted`` are copied over: they hold no job data by the
    class's own word (``OverLimit.limiter``). The traceback is kept, with the local
    variables of its finished frames (the opened argument among them) cleared, for the
    reporters that capture them. A class that cannot be made this way, or whose message
    still does not read ``HIDDEN``, is replaced by ``EncryptedJobError`` naming it.
    """
    traceback.clear_frames(exc.__traceback__)
    concealed = _blank(exc)
    concealed.__traceback__ = exc.__traceback__
    concealed.__suppress_context__ = True
    return concealed


def _blank(exc: Exception) -> Exception:
    cls = type(exc)
    try:
        if isinstance(exc, ExceptionGroup):
            blank = cls.__new__(cls, HIDDEN, [conceal(member) for member in exc.exceptions])
            readable = str(blank) == BaseExceptionGroup.__str__(blank)
        else:
            blank = cls.__new__(cls, HIDDEN)
            blank.args = (HIDDEN,)
            readable = str(blank) in (HIDDEN, repr(HIDDEN))
        for name in getattr(cls, KEPT, ()):
            if hasattr(exc, name):
                setattr(blank, name, getattr(exc, name))
    except Exception:
        readable = False
    if readable:
        return blank
    return EncryptedJobError(f"{_name(exc)}: {HIDDEN}")


def _name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def plug(wurk: Wurk) -> Plug:
    """What encryption plugs into ``wurk``: the client middleware that seals, the server one that opens."""
    return Plug(client=EncryptionClientMiddleware(wurk), server=EncryptionServerMiddleware(wurk))
