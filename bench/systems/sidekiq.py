"""Ruby Sidekiq, as Debian packages it (ruby-sidekiq 6.4.1): one process, ``-c 10``.

Its jobs and client are bench/ruby/jobs.rb and bench/ruby/client.rb. Logging at WARN, so no
per-job lines (the equivalent of ``runwurk -v 0``).
"""

from __future__ import annotations

import shutil
import subprocess

from bench.systems.base import System


class Sidekiq(System):
    key = "sidekiq"
    label = "Sidekiq -c 10 (Ruby)"
    topology = "1 process x 10 threads"
    slots = 10
    has_bulk = True

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

    def worker_command(self, url: str) -> list[str]:
        return ["sidekiq", "-r", "./bench/ruby/jobs.rb", "-c", "10", "-q", "default", "-t", "5"]

    def client_command(self) -> list[str]:
        return ["ruby", "bench/ruby/client.rb"]
