"""The common interface of a benchmarked system, as the driver (bench/run.py) sees it.

A system says how to start its worker and how to run its client (``bench/client.py`` for
Python systems, ``bench/ruby/client.rb`` for Sidekiq); everything else (filling queues,
timing drains, sampling memory) is the driver's, identical for every system. Modules here
use only the standard library: they run in the driver's virtualenv, not the system's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS_VENV = ROOT / "bench" / ".peers-venv"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"


class System:
    #: Short name used on the command line and in results/latest.json.
    key: str = ""
    #: Row label in the tables.
    label: str = ""
    #: How it runs, processes x threads (the *why* is in docs/benchmarks.md).
    topology: str = ""
    #: Jobs that can run at once (bounds the ``io`` workload: slots / 5 ms).
    slots: int = 1
    #: Fraction of the default job counts this system gets, so slow systems do not take
    #: minutes per drain. Throughput is a rate, so it does not depend on the count much.
    scale: float = 1.0
    #: Whether the client has a bulk enqueue API (``push_bulk``).
    has_bulk: bool = False
    #: The drain workloads it runs. Variants (logging on, no hiredis) exist for one ratio
    #: each and run only ``noop``, which keeps the default run under 15 minutes.
    workloads: tuple[str, ...] = ("noop", "cpu", "io")
    #: Whether its enqueue rates are measured (a variant whose client is the same as its
    #: base system's is not measured twice).
    enqueues: bool = True
    #: Whether boot time and idle latency are measured.
    latency: bool = True
    #: Worker processes that register in Sidekiq's ``processes`` set (django-wurk and Sidekiq
    #: do). When set, a drain waits until every one has registered and its fetchers are
    #: blocked on the empty queue, then hands the filled queue over at once: so a process that
    #: boots later than its sibling does not drain the first part alone. 0: the worker starts
    #: on the filled queue and the clock starts with its first job.
    registers: int = 0

    def env(self, root: Path) -> dict[str, str]:
        """Environment variables its worker and client get on top of the driver's (``root``:
        the source tree they run from)."""
        return {}

    def unavailable(self) -> str | None:
        """Why this system cannot run here, or None if it can."""
        return None

    def version(self) -> str:
        raise NotImplementedError

    def worker_command(self, url: str) -> list[str]:
        """The command that starts the worker(s), listening to the queue ``default``.

        Commands run in the driver's copy of the source tree (see bench/run.py), so paths in
        them are relative to the repository root."""
        raise NotImplementedError

    def worker_commands(self, url: str) -> list[list[str]]:
        """Every process to start for one worker (several for two independent Sidekiqs);
        they share one process group, so stopping the worker stops them all."""
        return [self.worker_command(url)]

    def client_command(self) -> list[str]:
        """The client command; the driver appends ``enqueue ...`` or ``latency ...``."""
        raise NotImplementedError


class PythonSystem(System):
    """A system driven through ``bench/client.py`` with the app module ``app``."""

    python: Path = PEERS_PYTHON
    app: str = ""
    #: The distribution whose version is reported.
    distribution: str = ""

    def unavailable(self) -> str | None:
        if not self.python.exists():
            return f"no {self.python.relative_to(ROOT)}"
        probe = subprocess.run(
            [str(self.python), "-c", f"import {self.app.rsplit('.', 1)[0]}, {self.distribution}"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if probe.returncode:
            return f"{self.distribution} is not installed"
        return None

    def version(self) -> str:
        return subprocess.run(
            [
                str(self.python),
                "-c",
                f"import importlib.metadata as m; print(m.version({self.distribution!r}))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def client_command(self) -> list[str]:
        return [str(self.python), "bench/client.py", self.app]

    def bin(self, name: str) -> str:
        return str(self.python.parent / name)
