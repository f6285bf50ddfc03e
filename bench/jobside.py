"""What every Python benchmark job calls: the workloads and the completion probe.

Imported inside the workers of every Python system (django-wurk and the peers), so it needs
only the standard library and redis-py. ``bench/ruby/jobs.rb`` is its Ruby twin; keep them in
step.

Counting completions must not change what is measured, so a job never talks to Redis: it
bumps a counter in its own process (``begin``/``end``), and a background thread per process
adds the counts to Redis every few milliseconds, together with the wall-clock time of the
process's first job start and of its latest job end. The driver reads:

- ``bench:done``: jobs finished, all processes together;
- ``bench:first:<pid>`` / ``bench:last:<pid>``: first start and latest end in each process
  (``time.time()`` seconds);
- ``bench:pids``: the pids of the processes that ran jobs (for memory sampling);
- ``bench:lat``: enqueue-to-start latencies of ``lat`` jobs, in seconds.
"""

from __future__ import annotations

import os
import threading
import time

CPU_ITERATIONS = 10_000
IO_SECONDS = 0.005
FLUSH_INTERVAL = 0.01

_lock = threading.Lock()
_pid = 0
_done = 0
_flushed = 0
_first = 0.0
_last = 0.0


def cpu() -> int:
    """The fixed arithmetic loop of the ``cpu`` workload."""
    x = 0
    for i in range(CPU_ITERATIONS):
        x += i * i % 7
    return x


def io() -> None:
    """The ``io`` workload: a 5 ms wait, as for a network call."""
    time.sleep(IO_SECONDS)


def begin() -> None:
    """Call first thing in a job."""
    global _pid, _done, _flushed, _first
    if _pid != os.getpid():
        with _lock:
            if _pid != os.getpid():  # first job in this process (or in a forked child)
                _done = _flushed = 0
                _first = time.time()
                _pid = os.getpid()
                threading.Thread(target=_flusher, name="bench-flusher", daemon=True).start()


def end() -> None:
    """Call last thing in a job."""
    global _done, _last
    now = time.time()
    with _lock:
        _done += 1
        _last = now


def record_latency(enqueued_at: float) -> None:
    """The ``lat`` workload: store how long ago the client enqueued this job."""
    latency = time.time() - enqueued_at
    _redis().rpush("bench:lat", latency)


def _redis():  # type: ignore[no-untyped-def]
    import redis

    return redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])


def _flusher() -> None:
    global _flushed
    r = _redis()
    pid = os.getpid()
    r.pipeline().sadd("bench:pids", pid).set(f"bench:first:{pid}", repr(_first)).execute()
    while True:
        time.sleep(FLUSH_INTERVAL)
        with _lock:
            done, last = _done, _last
        if done != _flushed:
            r.pipeline().set(f"bench:last:{pid}", repr(last)).incrby("bench:done", done - _flushed).execute()
            _flushed = done
