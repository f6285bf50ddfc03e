"""django-wurk: ``runwurk -P N -c 10`` on the minimal Django project in bench/settings.py."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.systems.base import PythonSystem


class Wurk(PythonSystem):
    python = Path(sys.executable)  # the project's own virtualenv, the driver's
    app = "bench.benchapp.client"
    distribution = "django_wurk"
    has_bulk = True

    def __init__(self, processes: int, concurrency: int = 10) -> None:
        self.processes = processes
        self.concurrency = concurrency
        self.key = f"wurk-p{processes}"
        self.label = f"django-wurk -P {processes} -c {concurrency}"
        self.topology = f"{processes} process{'es' if processes > 1 else ''} x {concurrency} threads"
        self.slots = processes * concurrency

    def unavailable(self) -> str | None:
        return None  # the driver itself runs in django-wurk's virtualenv

    def version(self) -> str:
        from django_wurk import __version__

        return __version__

    def worker_command(self, url: str) -> list[str]:
        # -v 0: no per-job log lines, as Sidekiq at WARN; -t 5: do not wait long at shutdown.
        return [
            str(self.python), "-m", "django", "runwurk",
            "-P", str(self.processes), "-c", str(self.concurrency), "-q", "default", "-v", "0", "-t", "5",
        ]  # fmt: skip
