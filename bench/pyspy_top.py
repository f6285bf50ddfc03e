"""Top functions of a ``py-spy record --format raw`` profile, as shares of the samples.

    py-spy record --format raw -o worker.txt -d 5 -r 100 -t --pid PID
    .venv/bin/python bench/pyspy_top.py worker.txt [--threads wurk-processor] [--top 25]

*self* is where a sample's innermost frame was; *total* counts a sample once for every
function anywhere on its stack. ``--threads`` keeps the samples of threads whose name
starts with the given text (``-t`` must have been given to py-spy for thread names).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

FRAME = re.compile(r"^(.*) \((.*?):\d+\)$")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile")
    parser.add_argument("--threads", default="")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    with open(args.profile) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if frames and frames[0].startswith("thread ("):
                thread = frames.pop(0).partition(": ")[2]
                if not thread.startswith(args.threads):
                    continue
            elif args.threads:
                continue
            names = []
            for frame in frames:
                m = FRAME.match(frame)
                names.append(f"{m.group(1)} ({m.group(2)})" if m else frame)
            n = int(count)
            samples += n
            if names:
                own[names[-1]] += n
            for name in set(names):
                total[name] += n
    print(f"{samples} samples")
    print(f"{'self':>6} {'total':>6}  function")
    for name, n in own.most_common(args.top):
        print(f"{100 * n / samples:5.1f}% {100 * total[name] / samples:5.1f}%  {name}")
    print("\nby total:")
    for name, n in total.most_common(args.top):
        print(f"{100 * own[name] / samples:5.1f}% {100 * n / samples:5.1f}%  {name}")


if __name__ == "__main__":
    main()
