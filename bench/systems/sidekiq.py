"""Ruby Sidekiq: Debian's 6.4.1 (ruby-sidekiq), one or two processes, ``-c 10``, with
redis-rb's Ruby driver or its hiredis one; and 7.3 and 8.0, unpacked from
``../shared/peers/ruby-sidekiq`` (their released sources; redis-client's Ruby driver, the one
they ship with).

Its jobs and client are bench/ruby/jobs.rb and bench/ruby/client.rb. Logging at WARN, so no
per-job lines (the equivalent of ``runwurk -v 0``); the ``logging`` variant leaves Sidekiq's
logger at its default INFO (``BENCH_SIDEKIQ_LOG=1``), so every job logs its start and done
lines to stdout, which the harness sends to a file, as it does runwurk's stderr.

Two processes are two independent ``sidekiq`` commands on the same queue (Sidekiq has no
``-P``): the same cores as ``runwurk -P 2``. Each ratio against "Sidekiq" is also shown
against the fastest configuration of each version (bench/report.py), so a slow driver never
flatters us.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.systems.base import ROOT, System

#: Sidekiq 7.3 and 8.0's released sources and their setup.sh (``WURK_SIDEKIQ_PEERS`` names
#: another copy); unpacked once into a temporary directory, about a second.
PEERS_DIR = Path(os.environ.get("WURK_SIDEKIQ_PEERS") or ROOT.parent / "shared" / "peers" / "ruby-sidekiq")
UNPACKED = Path(tempfile.gettempdir()) / "django-wurk-bench-sidekiq-peers"
#: The env script setup.sh writes for each unpacked version.
ENV_SCRIPTS = {"7.3": "env-7.sh", "8.0": "env-8.sh"}


@functools.cache
def peer_env(version: str) -> dict[str, str] | str:
    """RUBYLIB, RUBYOPT, SIDEKIQ_BIN of an unpacked version, or why it cannot run."""
    if not (PEERS_DIR / "setup.sh").is_file():
        return f"Sidekiq {version} lives in {PEERS_DIR}, which is absent"
    setup = subprocess.run(
        ["bash", str(PEERS_DIR / "setup.sh"), str(UNPACKED)], capture_output=True, text=True
    )
    if setup.returncode:
        return f"{PEERS_DIR}/setup.sh failed: {setup.stderr.strip()[-300:]}"
    script = (UNPACKED / ENV_SCRIPTS[version]).read_text()
    return dict(re.findall(r'^export (\w+)="?([^"\n]*)"?$', script, re.MULTILINE))


class Sidekiq(System):
    has_bulk = True

    def __init__(
        self, processes: int = 1, logging: bool = False, release: str = "6.4.1", driver: str = "ruby"
    ) -> None:
        self.processes = processes
        self.logging = logging
        #: "6.4.1" (Debian's), "7.3" or "8.0" (unpacked from PEERS_DIR).
        self.release = release
        #: redis-rb's "ruby" driver or its "hiredis" one (ruby-hiredis; 6.4.1 only: 7.x and 8.0
        #: talk to Redis through redis-client, whose C driver is another gem, not packaged).
        self.driver = driver
        self.registers = processes
        self.key = (
            "sidekiq"
            + ("" if release == "6.4.1" else release.split(".")[0])
            + (f"-x{processes}" if processes > 1 else "")
            + ("-log" if logging else "")
            + ("-hiredis" if driver == "hiredis" else "")
        )
        name = "Sidekiq" if release == "6.4.1" else f"Sidekiq {release}"
        self.label = (
            f"{name} -c 10 (Ruby)" if processes == 1 else f"{name} -c 10 x {processes} processes (Ruby)"
        )
        if logging:
            self.label += ", per-job logging"
        if driver == "hiredis":
            self.label += ", hiredis driver"
        self.topology = f"{processes} process{'es' if processes > 1 else ''} x 10 threads"
        self.slots = 10 * processes
        if processes > 1 or logging or driver != "ruby" or release != "6.4.1":
            # Variants: the one noop ratio each (a newer version's client is measured by the
            # enqueue of 6.4.1's, which is the same Sidekiq::Client.push API).
            self.workloads = ("noop",)
            self.enqueues = self.latency = False

    def unavailable(self) -> str | None:
        if not shutil.which("ruby") or not shutil.which("sidekiq"):
            return "no ruby/sidekiq on PATH (Debian: apt-get install ruby-sidekiq)"
        if self.release != "6.4.1":
            env = peer_env(self.release)
            if isinstance(env, str):
                return env
        probe = subprocess.run(
            ["ruby", "-e", f'require "sidekiq"; require "redis"; {self._driver_probe()}'],
            capture_output=True,
            env=dict(os.environ) | self.env(ROOT),
        )
        return f"ruby cannot load sidekiq {self.release} ({self.driver} driver)" if probe.returncode else None

    def _driver_probe(self) -> str:
        return 'require "hiredis"' if self.driver == "hiredis" else ""

    def version(self) -> str:
        driver = " with the hiredis driver" if self.driver == "hiredis" else ""
        script = f'require "sidekiq"; puts "#{{Sidekiq::VERSION}} (Ruby #{{RUBY_VERSION}}){driver}"'
        return subprocess.run(
            ["ruby", "-e", script],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ) | self.env(ROOT),
        ).stdout.strip()

    def env(self, root: Path) -> dict[str, str]:
        env = {"BENCH_SIDEKIQ_LOG": "1"} if self.logging else {}
        if self.driver == "hiredis":
            env["BENCH_SIDEKIQ_DRIVER"] = "hiredis"
        if self.release != "6.4.1":
            peer = peer_env(self.release)
            if isinstance(peer, dict):
                env |= {k: v for k, v in peer.items() if k in ("RUBYLIB", "RUBYOPT")}
        return env

    def worker_command(self, url: str) -> list[str]:
        if self.release != "6.4.1":
            peer = peer_env(self.release)
            sidekiq = ["ruby", peer["SIDEKIQ_BIN"]] if isinstance(peer, dict) else ["sidekiq"]
        else:
            sidekiq = ["sidekiq"]
        return [*sidekiq, "-r", "./bench/ruby/jobs.rb", "-c", "10", "-q", "default", "-t", "5"]

    def worker_commands(self, url: str) -> list[list[str]]:
        return [self.worker_command(url)] * self.processes

    def client_command(self) -> list[str]:
        return ["ruby", "bench/ruby/client.rb"]
