"""Huey with Redis storage: ``huey_consumer -w 2 -k process``.

Process workers, one per core: a no-op job is all interpreter time, so threads or greenlets
would share one GIL (Huey's docs: "process for CPU-intensive workloads"). Redis storage
blocks on BRPOP (``blocking=True``, Huey's default), so there is no polling delay. Results
are off (``results=False``) since nothing reads them, and the periodic-task scheduler is
off (``-n``) since there are no periodic tasks.
"""

from __future__ import annotations

from bench.systems.base import PythonSystem


class Huey(PythonSystem):
    key = "huey"
    label = "Huey -w 2 -k process"
    topology = "2 processes x 1"
    slots = 2
    app = "bench.peers.huey_app"
    distribution = "huey"

    def worker_command(self, url: str) -> list[str]:
        return [self.bin("huey_consumer"), f"{self.app}.huey", "-w", "2", "-k", "process", "-n", "-q"]
