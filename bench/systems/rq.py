"""RQ: ``rq worker-pool -n 2 -w rq.worker.SimpleWorker``.

RQ's default ``Worker`` forks a work horse for every job, which costs milliseconds per
job; ``SimpleWorker`` runs jobs in the worker process itself, the fastest class RQ ships
for short jobs. ``worker-pool -n 2`` runs two of them, one per core. Results are not kept
(``result_ttl=0`` at enqueue).
"""

from __future__ import annotations

from bench.systems.base import PythonSystem


class RQ(PythonSystem):
    key = "rq"
    label = "RQ worker-pool -n 2 SimpleWorker"
    topology = "2 processes x 1"
    slots = 2
    scale = 0.05
    app = "bench.peers.rq_app"
    distribution = "rq"
    has_bulk = True

    def worker_command(self, url: str) -> list[str]:
        return [
            self.bin("rq"), "worker-pool", "-n", "2", "-w", "rq.worker.SimpleWorker", "-q",
            "-u", url, "default",
        ]  # fmt: skip
