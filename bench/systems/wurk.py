"""django-wurk: ``runwurk -P N -c 10`` on the minimal Django project in bench/settings.py.

Two variants exist besides the plain system, for the ratios issue 16 asks for:

- ``logging``: without ``-v 0``, so at runwurk's default verbosity every job logs its start and
  done lines (to stderr, which the harness sends to a file, as it does Sidekiq's stdout);
- ``hiredis=False``: redis-py cannot import hiredis (bench/nohiredis/ comes first on the path
  and its ``hiredis`` raises ImportError), so it parses replies in Python, as a plain
  ``pip install`` of an older django-wurk did. bench/settings.py checks it in every process.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.systems.base import PythonSystem


def hiredis_installed() -> bool:
    """Whether redis-py uses hiredis in the driver's virtualenv, the one the workers run in."""
    try:
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:
        return False
    return bool(HIREDIS_AVAILABLE)


class Wurk(PythonSystem):
    python = Path(sys.executable)  # the project's own virtualenv, the driver's
    app = "bench.benchapp.client"
    distribution = "django_wurk"
    has_bulk = True
    registers = 1

    def __init__(
        self, processes: int, concurrency: int = 10, logging: bool = False, hiredis: bool = True
    ) -> None:
        self.processes = processes
        self.concurrency = concurrency
        self.logging = logging
        self.hiredis = hiredis
        self.registers = processes  # the supervisor of -P 2 runs no jobs and does not register
        suffix = "-log" if logging else "" if hiredis else "-nohiredis"
        self.key = f"wurk-p{processes}{suffix}"
        self.label = f"django-wurk -P {processes} -c {concurrency}"
        if logging:
            self.label += ", per-job logging"
        if not hiredis:
            self.label += ", no hiredis"
        self.topology = f"{processes} process{'es' if processes > 1 else ''} x {concurrency} threads"
        self.slots = processes * concurrency
        if logging or not hiredis:
            self.workloads = ("noop",)
            self.latency = False
            self.enqueues = not hiredis  # the client parses replies too; the log lines are the worker's

    def unavailable(self) -> str | None:
        # The driver itself runs in django-wurk's virtualenv.
        if not self.hiredis and not hiredis_installed():
            return "hiredis is not installed, so the plain django-wurk rows are already without it"
        return None

    def version(self) -> str:
        from django_wurk import __version__

        return __version__

    def env(self, root: Path) -> dict[str, str]:
        if not self.hiredis:
            return {"PYTHONPATH": f"{root / 'bench' / 'nohiredis'}:{root}", "BENCH_HIREDIS": "off"}
        return {"BENCH_HIREDIS": "on"} if hiredis_installed() else {}

    def worker_command(self, url: str) -> list[str]:
        # -v 0: no per-job log lines, as Sidekiq at WARN; -t 5: do not wait long at shutdown.
        return [
            str(self.python), "-m", "django", "runwurk",
            "-P", str(self.processes), "-c", str(self.concurrency), "-q", "default",
            *([] if self.logging else ["-v", "0"]), "-t", "5",
        ]  # fmt: skip
