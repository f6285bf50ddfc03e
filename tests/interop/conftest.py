"""Fixtures for the wire-compatibility suite: real Ruby Sidekiq 6.4.1, 7.3 and 8.0 against our Redis.

Ruby and Sidekiq 6.4.1 come from Debian (`apt-get install ruby-sidekiq ruby-rack ruby-webrick
ruby-activejob`). Without them (or without ActiveJob, for the ActiveJob checks) these tests
are skipped with the reason, on a laptop; with ``WURK_REQUIRE_RUBY=1`` (set by ``.ci/run``) a
missing Ruby fails them instead.

Sidekiq 7.3 and 8.0 (``sidekiq_peer``) are unpacked from ``../shared/peers/ruby-sidekiq``
beside the checkout (its ``setup.sh``, about a second, once per test session). Without
``../shared`` their tests skip with the reason, so a bare clone still passes; with
``WURK_REQUIRE_PEERS=1`` (set by ``.ci/run``, where ``../shared`` always exists) they fail
instead, and so does any problem setting them up once ``../shared`` is there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for

RUBY_DIR = Path(__file__).resolve().parent / "ruby"
SIDEKIQ_VERSION = "6.4.1"
#: Ruby Sidekiq 7.3 and 8.0 from their released sources (``WURK_SIDEKIQ_PEERS`` names another copy).
PEERS_DIR = Path(
    os.environ.get("WURK_SIDEKIQ_PEERS")
    or Path(__file__).resolve().parents[3] / "shared" / "peers" / "ruby-sidekiq"
)
#: The versions the fleet tests run against: Debian's, then the two unpacked from ``PEERS_DIR``.
VERSIONS = ("6.4.1", "7.3", "8.0")


def _ruby_problem() -> str | None:
    if not shutil.which("ruby") or not shutil.which("sidekiq"):
        return "ruby and sidekiq are not installed (apt-get install ruby-sidekiq ruby-rack ruby-webrick)"
    probe = subprocess.run(
        ["ruby", "-e", 'require "sidekiq"; print Sidekiq::VERSION'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return f"ruby cannot load sidekiq: {probe.stderr.strip()}"
    if probe.stdout != SIDEKIQ_VERSION:
        return f"these checks target Sidekiq {SIDEKIQ_VERSION}, found {probe.stdout}"
    return None


def _activejob_problem() -> str | None:
    probe = subprocess.run(
        ["ruby", "-e", 'require "active_job"; print ActiveJob.version'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no output"])[0]
        return f"ruby cannot load ActiveJob (apt-get install ruby-activejob): {reason}"
    return None


def _require(problem: str | None) -> None:
    """Skip with the reason on a laptop; fail under ``WURK_REQUIRE_RUBY=1`` (CI)."""
    if problem is None:
        return
    if os.environ.get("WURK_REQUIRE_RUBY") == "1":
        pytest.fail(f"WURK_REQUIRE_RUBY=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def ruby() -> None:
    _require(_ruby_problem())


@dataclass(frozen=True)
class Peer:
    """One Ruby Sidekiq version: how to run its Ruby, its ``sidekiq`` and its ``rackup``."""

    version: str
    #: Variables added to the environment (``RUBYLIB``, ``RUBYOPT``), empty for Debian's 6.4.1.
    env: tuple[tuple[str, str], ...] = ()
    sidekiq: tuple[str, ...] = ("sidekiq",)
    rackup: tuple[str, ...] = ("rackup",)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def environ(self, redis_url: str) -> dict[str, str]:
        return {**ruby_env(redis_url), **dict(self.env)}

    def ruby(self, redis_url: str, command: dict[str, Any]) -> Any:
        """Run one client.rb command under this version; its result."""
        proc = subprocess.run(
            ["ruby", str(RUBY_DIR / "client.rb"), json.dumps(command)],
            env=self.environ(redis_url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise AssertionError(f"ruby (Sidekiq {self.version}) {command['op']} failed:\n{proc.stderr}")
        return json.loads(proc.stdout.splitlines()[-1])["result"]


def stamp_type(peer: Peer) -> type:
    """The JSON type of the job timestamps ``peer`` writes: float seconds, integer ms from 8.0."""
    return int if peer.major >= 8 else float


def _read_env_script(path: Path) -> tuple[tuple[str, str], ...]:
    """The ``export NAME="value"`` lines of setup.sh's env-7.sh / env-8.sh."""
    found = re.findall(r'^export (\w+)="?([^"\n]*)"?$', path.read_text(), re.MULTILINE)
    return tuple((name, value) for name, value in found)


def _peers_absent() -> str | None:
    if (PEERS_DIR / "setup.sh").is_file():
        return None
    return f"Sidekiq 7.3 and 8.0 live in {PEERS_DIR}, which is absent (a checkout without ../shared)"


def _require_peers(problem: str | None) -> None:
    """Skip with the reason without ``../shared``; fail under ``WURK_REQUIRE_PEERS=1`` (CI), and
    whenever ``../shared`` is there but a version cannot be set up or run."""
    if problem is None:
        return
    if os.environ.get("WURK_REQUIRE_PEERS") == "1":
        pytest.fail(f"WURK_REQUIRE_PEERS=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def unpacked_peers(ruby: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Peer]:
    """Sidekiq 7.3 and 8.0, unpacked by ``setup.sh`` into this session's temporary directory."""
    _require_peers(_peers_absent())
    dest = tmp_path_factory.mktemp("sidekiq-peers")
    setup = subprocess.run(
        ["bash", str(PEERS_DIR / "setup.sh"), str(dest)], capture_output=True, text=True, timeout=300
    )
    if setup.returncode != 0:
        pytest.fail(f"{PEERS_DIR}/setup.sh failed:\n{setup.stdout}\n{setup.stderr}")
    peers = {}
    for version, script in (("7.3", "env-7.sh"), ("8.0", "env-8.sh")):
        env = dict(_read_env_script(dest / script))
        peers[version] = Peer(
            version,
            tuple((k, v) for k, v in env.items() if k in ("RUBYLIB", "RUBYOPT")),
            ("ruby", env["SIDEKIQ_BIN"]),
            ("ruby", env["RACKUP_BIN"]),
        )
    return peers


class SidekiqProcess:
    """``sidekiq`` of one version with our shared job classes, until ``stop()`` (TERM)."""

    def __init__(self, peer: Peer, redis_url: str, logfile: Path, *queues: str, concurrency: int = 3,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        args = [*peer.sidekiq, "-r", str(RUBY_DIR / "app.rb"), "-c", str(concurrency), "-t", "5"]
        for q in queues or ("ruby", "default"):
            args += ["-q", q]
        self.logfile = logfile
        with logfile.open("w") as log:
            self.proc = subprocess.Popen(
                args, env={**peer.environ(redis_url), **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                text=True,
            )  # fmt: skip

    def log(self) -> str:
        return self.logfile.read_text(errors="replace")

    def registered(self, redis: Any) -> str | None:
        """Its identity once it is in the process set (it re-registers at each beat)."""
        if self.proc.poll() is not None:
            raise AssertionError(f"sidekiq exited early:\n{self.log()}")
        for member in redis.smembers("processes"):
            if member.decode().split(":")[1] == str(self.proc.pid):
                return str(member.decode())
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="session")
def activejob(ruby: None) -> None:
    """Rails' ActiveJob in Ruby, for the checks where Ruby enqueues or runs ActiveJob jobs
    (app.rb loads it only if present, so the rest of the suite runs without it)."""
    _require(_activejob_problem())


def ruby_env(redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REDIS_URL"] = redis_url
    env.pop("REDIS_PROVIDER", None)
    return env


@pytest.fixture(scope="module")
def peer(request: pytest.FixtureRequest, ruby: None) -> Peer:
    """The Sidekiq version a test runs against: 6.4.1 unless its module or test says otherwise
    with ``on_versions(...)`` (one value per version; the processes it starts are that
    version's)."""
    version = getattr(request, "param", SIDEKIQ_VERSION)
    if version == SIDEKIQ_VERSION:
        return Peer(SIDEKIQ_VERSION)
    peers: dict[str, Peer] = request.getfixturevalue("unpacked_peers")
    return peers[version]


def on_versions(*versions: str) -> pytest.MarkDecorator:
    """Run a test (or, as ``pytestmark``, a module) once per Sidekiq version; tests of one
    version run together, sharing its module-scoped processes.

    The cases of the peers from ``../shared`` (7.3, 8.0) are the long tail: what differs there
    is Ruby's side, not the server's, so CI runs them once, in pass 1 (tests/conftest.py),
    and the real-Redis pass runs the 6.4.1 cases."""
    params = [
        version if version == SIDEKIQ_VERSION else pytest.param(version, marks=pytest.mark.tail, id=version)
        for version in (versions or VERSIONS)
    ]
    return pytest.mark.parametrize("peer", params, indirect=True, scope="module")


@pytest.fixture
def rb(peer: Peer, redis_url: str, wurk: Any) -> Callable[..., Any]:
    """``rb(op="push", item={...})``: run one Sidekiq client/API operation in Ruby, return its result."""
    return lambda **command: peer.ruby(redis_url, command)


@dataclass
class RubyWorker:
    proc: subprocess.Popen[str]
    identity: str
    logfile: Path

    def log(self) -> str:
        return self.logfile.read_text(errors="replace")


@pytest.fixture
def ruby_worker(peer: Peer, redis_url: str, wurk: Any, tmp_path: Path) -> Iterator[Callable[..., RubyWorker]]:
    """Start ``sidekiq`` (``peer``'s version) with our shared job classes; stopped with TERM at teardown."""
    started: list[RubyWorker] = []

    def start(*queues: str, concurrency: int = 3, env: dict[str, str] | None = None) -> RubyWorker:
        """``env`` adds variables, e.g. ``{"SIDEKIQ_POLL": "0.2"}`` (see app.rb)."""
        logfile = tmp_path / f"sidekiq-{len(started)}.log"
        args = [*peer.sidekiq, "-r", str(RUBY_DIR / "app.rb"), "-c", str(concurrency), "-t", "5"]
        for q in queues or ("ruby", "default"):
            args += ["-q", q]
        with logfile.open("w") as log:
            proc = subprocess.Popen(
                args,
                env={**peer.environ(redis_url), **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        redis = wurk.redis

        def registered() -> str | None:
            if proc.poll() is not None:
                raise AssertionError(f"sidekiq exited early:\n{logfile.read_text()}")
            for member in redis.smembers("processes"):
                if member.decode().split(":")[1] == str(proc.pid):
                    return str(member.decode())
            return None

        worker = RubyWorker(proc, wait_for(registered, timeout=60), logfile)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.send_signal(signal.SIGTERM)
            try:
                worker.proc.wait(20)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait(10)


def ruby_seen(redis: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in redis.lrange("ruby:seen", 0, -1)]


@pytest.fixture
def start_python_worker(wurk: Any, test_config: Any) -> Iterator[Callable[..., Any]]:
    """``start_python_worker("q1", "q2", timestamps=...)``: our in-process worker (what
    ``manage.py runwurk`` runs) on those queues (default: ``default``), with one thread unless
    told otherwise so each queue's order is observable; other keywords replace config fields."""
    from django_wurk.core.config import QueueSpec
    from django_wurk.core.worker import Launcher

    started: list[Launcher] = []

    def start(*queues: str, concurrency: int = 1, **changes: Any) -> Launcher:
        names = queues or ("default",)
        wurk.configure(
            test_config.replace(concurrency=concurrency, queues=tuple(QueueSpec(q) for q in names), **changes)
        )
        worker = Launcher(wurk)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
