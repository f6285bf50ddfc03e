"""The enqueueing side of a Python system, run in that system's virtualenv.

    python bench/client.py APP enqueue WORKLOAD N [--bulk]
    python bench/client.py APP latency N [--interval SECONDS]

``APP`` is a module (``bench.benchapp.client``, ``bench.peers.huey_app``, ...) with
``push(workload, args)`` and, if the system has a bulk API, ``push_bulk(workload, list_of_args)``
(otherwise ``push_bulk = None``); django-wurk's also has ``push_batch`` (``--batch``): the
same bulk push inside one batch. Workloads: ``noop``, ``cpu``, ``io``, ``lat``. The result is
one JSON line on stdout; ``bench/ruby/client.rb`` is the Ruby twin.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("app")
    sub = parser.add_subparsers(dest="command", required=True)
    enqueue = sub.add_parser("enqueue", help="enqueue N jobs, timing it")
    enqueue.add_argument("workload", choices=["noop", "cpu", "io"])
    enqueue.add_argument("n", type=int)
    enqueue.add_argument("--bulk", action="store_true", help="use the system's bulk API")
    enqueue.add_argument("--batch", action="store_true", help="bulk, inside one batch (django-wurk)")
    latency = sub.add_parser("latency", help="enqueue N lat jobs one at a time, apart")
    latency.add_argument("n", type=int)
    latency.add_argument("--interval", type=float, default=0.02)
    opts = parser.parse_args()

    app = importlib.import_module(opts.app)
    if opts.command == "enqueue":
        args = [(i,) for i in range(opts.n)]
        started = time.perf_counter()
        if opts.batch:
            app.push_batch(opts.workload, args)
        elif opts.bulk:
            if app.push_bulk is None:
                parser.error(f"{opts.app} has no bulk API")
            app.push_bulk(opts.workload, args)
        else:
            for a in args:
                app.push(opts.workload, a)
        print(json.dumps({"seconds": time.perf_counter() - started}))
    else:
        for _ in range(opts.n):
            app.push("lat", (time.time(),))
            time.sleep(opts.interval)
        print(json.dumps({}))


if __name__ == "__main__":
    main()
