"""Ruby Sidekiq, as Debian packages it (ruby-sidekiq 6.4.1): one or two processes, ``-c 10``.

Its jobs and client are bench/ruby/jobs.rb and bench/ruby/client.rb. Logging at WARN, so no
per-job lines (the equivalent of ``runwurk -v 0``); the ``logging`` variant leaves Sidekiq's
logger at its default INFO (``BENCH_SIDEKIQ_LOG=1``), so every job logs its start and done
lines to stdout, which the harness sends to a file, as it does runwurk's stderr.

Two processes are two independent ``sidekiq`` commands on the same queue (Sidekiq has no
``-P``): the same cores as ``runwurk -P 2``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bench.systems.base import System


class Sidekiq(System):
    has_bulk = True

    def __init__(self, processes: int = 1, logging: bool = False) -> None:
        self.processes = processes
        self.logging = logging
        self.registers = processes
        self.key = "sidekiq" + (f"-x{processes}" if processes > 1 else "") + ("-log" if logging else "")
        self.label = (
            "Sidekiq -c 10 (Ruby)" if processes == 1 else f"Sidekiq -c 10 x {processes} processes (Ruby)"
        )
        if logging:
            self.label += ", per-job logging"
        self.topology = f"{processes} process{'es' if processes > 1 else ''} x 10 threads"
        self.slots = 10 * processes
        if processes > 1 or logging:  # variants: the one noop ratio each; the client is the same
            self.workloads = ("noop",)
            self.enqueues = self.latency = False

    def unavailable(self) -> str | None:
        if not shutil.which("ruby") or not shutil.which("sidekiq"):
            return "no ruby/sidekiq on PATH (Debian: apt-get install ruby-sidekiq)"
        probe = subprocess.run(["ruby", "-e", 'require "sidekiq"'], capture_output=True)
        return "ruby cannot load sidekiq" if probe.returncode else None

    def version(self) -> str:
        return subprocess.run(
            ["ruby", "-e", 'require "sidekiq"; puts "#{Sidekiq::VERSION} (Ruby #{RUBY_VERSION})"'],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def env(self, root: Path) -> dict[str, str]:
        return {"BENCH_SIDEKIQ_LOG": "1"} if self.logging else {}

    def worker_command(self, url: str) -> list[str]:
        return ["sidekiq", "-r", "./bench/ruby/jobs.rb", "-c", "10", "-q", "default", "-t", "5"]

    def worker_commands(self, url: str) -> list[list[str]]:
        return [self.worker_command(url)] * self.processes

    def client_command(self) -> list[str]:
        return ["ruby", "bench/ruby/client.rb"]
