"""Celery with the Redis broker: prefork pool of 2 (one per core).

Settings from Celery's "Optimizing" guide, in bench/peers/celery_app.py: results ignored,
prefetch multiplier 64 (many short tasks), rate limits disabled; and on the command line
no gossip, mingle or heartbeat (cluster events nobody listens to here), logging at WARNING.
"""

from __future__ import annotations

from bench.systems.base import PythonSystem


class Celery(PythonSystem):
    key = "celery"
    label = "Celery prefork -c 2"
    topology = "2 pool processes"
    slots = 2
    scale = 0.25
    app = "bench.peers.celery_app"
    distribution = "celery"

    def worker_command(self, url: str) -> list[str]:
        return [
            self.bin("celery"), "-A", self.app, "worker", "-P", "prefork", "-c", "2", "-Q", "celery",
            "-l", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
