"""Does encoding a bulk batch's shared fields once (``wire.dumps_alike``) still pay?

    python bench/encode_ab.py [--jobs 50000] [--rounds 7]

Pushes N no-op jobs with ``perform_bulk`` onto an embedded Valkey, alternating in one run
between the client as it is (A: ``wire.dumps_alike``) and the client encoding each payload
whole (B: ``wire.dumps`` per payload), so both see the same noise on a shared machine; the
order flips every round. Prints min / median / max jobs/s of each and the ratio of medians.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import RedisServer


def plain(payloads: Sequence[dict[str, Any]], varying: tuple[str, ...] = ("args", "jid")) -> list[str]:
    """B: every payload encoded whole, as ``wire.dumps`` alone would."""
    from django_wurk.core import wire

    return [wire.dumps(p) for p in payloads]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    opts = parser.parse_args()

    server = RedisServer(prefer="valkey")
    server.start()
    try:
        os.environ["WURK_REDIS_URL"] = server.url
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
        import django

        django.setup()
        from bench.benchapp import jobs
        from django_wurk import wurk
        from django_wurk.core import wire

        alike = wire.dumps_alike
        variants: dict[str, Callable[..., list[str]]] = {"A dumps_alike": alike, "B dumps": plain}
        args = [(i,) for i in range(opts.jobs)]
        rates: dict[str, list[float]] = {name: [] for name in variants}

        def once(encode: Callable[..., list[str]]) -> float:
            wurk.redis.flushall()
            wire.dumps_alike = encode  # type: ignore[assignment]
            gc.collect()
            started = time.perf_counter()
            jobs.noop.perform_bulk(args)
            seconds = time.perf_counter() - started
            wire.dumps_alike = alike
            assert wurk.redis.llen("queue:default") == opts.jobs
            return opts.jobs / seconds

        for encode in variants.values():  # warm-up, not counted
            once(encode)
        for round_ in range(opts.rounds):
            order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
            for name in order:
                rates[name].append(once(variants[name]))
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {rates[n][-1]:,.0f}/s" for n in variants))
        print(f"\n{opts.jobs:,} noop jobs per push, {opts.rounds} rounds each, {server.description}")
        for name, values in rates.items():
            print(
                f"{name:14} jobs/s  min {min(values):9,.0f}  median {statistics.median(values):9,.0f}"
                f"  max {max(values):9,.0f}"
            )
        a, b = (statistics.median(rates[n]) for n in variants)
        pairs = [x / y for x, y in zip(*rates.values(), strict=True)]
        print(f"A / B: {a / b:.3f} (medians); per round min {min(pairs):.3f}, max {max(pairs):.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
