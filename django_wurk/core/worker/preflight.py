"""The first round trip to Redis, before a worker starts: a Redis that can never take this
worker stops the start, naming the setting.

A worker rides out an outage (Redis restarting, a network blip) with back-off. Some
answers do not change however long it waits: a wrong password, a database index the
server does not have, TLS spoken to a plain port, a server that does not speak Redis.
Retried forever they looked like an outage that never ended, one log line per outage,
with ``/live`` green; here they end the start with an error and a non-zero exit. An error
that can heal (refused, timed out, a host name that does not resolve yet) is left to the
loops, as before: a worker started before its Redis simply waits for it.

``incurable`` is also what ``Outage`` reads to say "refuses" rather than "unreachable"
when such an answer comes later (Redis restarted with another password).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

from redis.exceptions import (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    AuthorizationError,
    InvalidResponse,
    NoPermissionError,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeout

from django_wurk.core.config import redact_url

#: Error replies no wait can change, as servers word them (Redis, Valkey; old and new).
_REFUSED_CREDENTIALS = ("WRONGPASS", "NOAUTH", "INVALID PASSWORD", "INVALID USERNAME-PASSWORD")
_NO_SUCH_DATABASE = ("DB INDEX IS OUT OF RANGE", "INVALID DB INDEX")
#: Plain-text probe of a port a TLS handshake got no answer from; a Redis answers it at once.
PLAIN_PROBE_TIMEOUT = 1.0


def incurable(exc: BaseException) -> str | None:
    """Why Redis will answer ``exc`` again however long we wait, in words; None if it may heal."""
    text = str(exc)
    upper = text.upper()
    if isinstance(exc, (AuthenticationError, AuthorizationError, AuthenticationWrongNumberOfArgsError)) or (
        isinstance(exc, ResponseError) and any(marker in upper for marker in _REFUSED_CREDENTIALS)
    ):
        return f"it refuses the user name or password: {text}"
    if isinstance(exc, NoPermissionError):
        return f"its ACL does not let this user run the commands a worker needs: {text}"
    if isinstance(exc, ResponseError) and any(marker in upper for marker in _NO_SUCH_DATABASE):
        return f"it has no database of the number the URL ends with: {text}"
    if isinstance(exc, InvalidResponse):
        return (
            f"it does not answer in the Redis protocol ({text}): a TLS port for a redis:// URL,"
            " or another service?"
        )
    tls = _tls_failure(exc)
    if tls is not None:
        return f"the TLS handshake failed: {tls}"
    return None


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """An ``ssl.SSLError`` behind ``exc`` that says the two sides cannot agree (a certificate
    not trusted, a peer that is not TLS); not one that says a connection was cut."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLError) and not isinstance(
            cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError, ssl.SSLWantReadError)
        ):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def speaks_plain_redis(url: str) -> bool:
    """Whether the host and port of a ``rediss://`` URL answer a plain-text ``PING``.

    A TLS handshake sent to a plain Redis port gets no reply at all (the server waits for
    the end of a line that never comes), which looks like a timeout: an outage. One plain
    ``PING`` tells the two apart; any reply (``+PONG``, or ``-NOAUTH``) is Redis without TLS.
    """
    parts = urlsplit(url)
    try:
        host, port = parts.hostname, parts.port or 6379
    except ValueError:
        return False
    if not host:
        return False
    try:
        with socket.create_connection((host, port), timeout=PLAIN_PROBE_TIMEOUT) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(1)
    except OSError:
        return False
    return reply in (b"+", b"-")


def preflight(ping: Callable[[], object], url: str) -> str | None:
    """One round trip; why it can never work (a sentence naming the server), or None.

    None too when Redis is merely unreachable: the worker starts and rides the outage out.
    """
    try:
        ping()
    except RedisError as exc:
        why = incurable(exc)
        if (
            why is None
            and isinstance(exc, RedisTimeout)
            and url.startswith("rediss://")
            and speaks_plain_redis(url)
        ):
            why = "it answers without TLS: this rediss:// URL speaks TLS to a plain port (use redis://)"
        if why is not None:
            return f"Redis at {redact_url(url)} cannot be used: {why}"
    return None
