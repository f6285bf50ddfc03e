"""Dramatiq with the Redis broker: ``dramatiq -p 2 -t 8``, its defaults (one process per core,
eight threads each), which is also how the issue's reference figure was measured."""

from __future__ import annotations

from bench.systems.base import PythonSystem


class Dramatiq(PythonSystem):
    key = "dramatiq"
    label = "Dramatiq -p 2 -t 8"
    topology = "2 processes x 8 threads"
    slots = 16
    app = "bench.peers.dramatiq_app"
    distribution = "dramatiq"

    def worker_command(self, url: str) -> list[str]:
        return [self.bin("dramatiq"), self.app, "-p", "2", "-t", "8", "-Q", "default"]
