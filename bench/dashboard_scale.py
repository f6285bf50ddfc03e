"""How the dashboard and the data API cost as the work in Redis grows (issue 16, "Cost as work grows").

    python bench/dashboard_scale.py            # small (10 processes, 1k jobs, 1k entries) and big
                                               # (100 processes, 1M jobs, 100k entries): ~7 min
    python bench/dashboard_scale.py --quick    # big = 100 processes, 100k jobs, 10k entries
    make bench-dashboard

A private Redis (bench/harness.py's ``RedisServer``, never the machine's own) is filled with
pipelined writes of what workers and clients write: Sidekiq payloads (``wire.dumps``) in 10
queues, heartbeat hashes and busy-work hashes for live processes (every thread busy), and
retry and dead sets of failed jobs. Each page is fetched through Django's test client, logged
in as a superuser, several times; the median is reported. Bulk actions ("retry all", "kill
all", "delete all") change the data, so each repetition starts from a fresh fill and only the
action is timed. The table gives each size's median and the ratio big/small: a ratio near 1
is O(1) in the data, near the size ratio is O(n).

Wall-clock figures on a shared machine are noise beyond their order of magnitude: the load
average is printed with them (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from bench.harness import RedisServer  # noqa: E402

QUEUES = 10
THREADS = 10
CHUNK = 1000


@dataclass(frozen=True)
class Size:
    label: str
    processes: int
    jobs: int
    entries: int


SMALL = Size("small", 10, 1_000, 1_000)
BIG = Size("big", 100, 1_000_000, 100_000)
QUICK_BIG = Size("big", 100, 100_000, 10_000)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def setup_django(url: str) -> Any:
    """Django with the admin, an in-memory database and one logged-in superuser; its test client."""
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="bench-only-not-secret",
        DEBUG=False,
        USE_TZ=True,
        ALLOWED_HOSTS=["testserver"],
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.staticfiles",
            "django_wurk",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        ROOT_URLCONF="bench.dashboard_urls",
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        STATIC_URL="/static/",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        LOGGING_CONFIG=None,
        # A dead set of 100k entries needs a cap above it (Sidekiq's default is 10,000).
        WURK={"REDIS_URL": url, "DEAD_MAX_JOBS": 10_000_000},
    )
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    client = Client()
    client.force_login(User.objects.create_superuser("bench", password="bench"))
    return client


def url(page: str, /, **kwargs: Any) -> str:
    from django.urls import reverse

    return reverse(f"admin:django_wurk_dashboard_{page}", kwargs=kwargs or None)


# Filling Redis ---------------------------------------------------------------------------------


def job(i: int, queue: str, now: float) -> dict[str, Any]:
    from django_wurk.core import wire

    return {
        "retry": True,
        "queue": queue,
        "class": "app.jobs.SendReport",
        "args": [i, f"user{i}@example.com", {"locale": "en", "full": True}],
        "jid": wire.new_jid(),
        "created_at": now - 3600,
        "enqueued_at": now - 3600,
    }


def failed(i: int, now: float) -> dict[str, Any]:
    data = job(i, f"q{i % QUEUES}", now)
    data.update(
        error_message=f"report {i} failed: connection reset by peer",
        error_class="ConnectionError",
        failed_at=now - 600,
        retry_count=3,
        retried_at=now - 60,
    )
    return data


def fill_processes(r: redis.Redis, n: int) -> None:
    """What ``n`` live heartbeats leave: the processes set, each process hash, and a busy-work
    hash with every one of its ``THREADS`` threads running a job."""
    from django_wurk.core import keys, wire

    now = time.time()
    pipe = r.pipeline(transaction=False)
    for p in range(n):
        identity = f"web-{p // 4}.example.com:{1000 + p}:{p:012x}"
        info = {
            "hostname": f"web-{p // 4}.example.com",
            "started_at": now - 3600,
            "pid": 1000 + p,
            "tag": "app",
            "concurrency": THREADS,
            "queues": [f"q{q}" for q in range(QUEUES)],
            "weights": [{f"q{q}": 1 for q in range(QUEUES)}],
            "labels": ["bench"],
            "identity": identity,
            "version": "0.1",
            "embedded": False,
        }
        pipe.sadd(keys.PROCESSES, identity)
        pipe.hset(
            keys.process(identity),
            mapping={
                "info": wire.dumps(info),
                "concurrency": THREADS,
                "busy": THREADS,
                "beat": repr(now),
                "rtt_us": 120,
                "quiet": "false",
                "rss": 81_920,
            },
        )
        pipe.expire(keys.process(identity), 3600)
        work: dict[Any, Any] = {
            f"tid{t:04x}": wire.dumps(
                {
                    "queue": f"q{t % QUEUES}",
                    "payload": wire.dumps(job(t, f"q{t % QUEUES}", now)),
                    "run_at": int(now),
                }
            )
            for t in range(THREADS)
        }
        pipe.hset(keys.work(identity), mapping=work)
        pipe.expire(keys.work(identity), 3600)
    pipe.execute()


def fill_queues(r: redis.Redis, jobs: int) -> None:
    from django_wurk.core import keys, wire

    now = time.time()
    per = jobs // QUEUES
    for q in range(QUEUES):
        name = f"q{q}"
        r.sadd(keys.QUEUES, name)
        pipe = r.pipeline(transaction=False)
        for start in range(0, per, CHUNK):
            pipe.lpush(
                keys.queue(name),
                *(wire.dumps(job(i, name, now)) for i in range(start, min(start + CHUNK, per))),
            )
            if len(pipe) >= 20:
                pipe.execute()
        pipe.execute()


def set_rows(n: int, dead: bool) -> list[tuple[bytes, float]]:
    """``n`` members of a retry set (due from now on) or a dead set (died in the last days)."""
    from django_wurk.core import wire

    now = time.time()
    rows = []
    for i in range(n):
        score = now - 86_400 * 3 + i * 0.5 if dead else now + 3600 + i * 0.5
        rows.append((wire.dumps(failed(i, now)).encode(), score))
    return rows


def fill_set(r: redis.Redis, key: str, rows: list[tuple[bytes, float]]) -> None:
    pipe = r.pipeline(transaction=False)
    for start in range(0, len(rows), CHUNK):
        pipe.zadd(key, dict(rows[start : start + CHUNK]))
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()


# Measuring ---------------------------------------------------------------------------------------


#: (wall clock, CPU of this process, CPU of the Redis server), each in seconds.
Sample = tuple[float, float, float]


def redis_cpu(r: redis.Redis) -> float:
    cpu = r.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def median_time(
    r: redis.Redis, fn: Callable[[], object], reps: int, before: Callable[[], object] | None = None
) -> Sample:
    """Medians of ``reps`` calls of ``fn``: wall clock, and the CPU this process and Redis
    spent (less sensitive than the wall clock to what else runs on the machine)."""
    samples = []
    for _ in range(reps):
        if before is not None:
            before()
        server = redis_cpu(r)
        cpu = time.process_time()
        started = time.perf_counter()
        fn()
        wall = time.perf_counter() - started
        samples.append((wall, time.process_time() - cpu, redis_cpu(r) - server))
    wall, cpu, server = (statistics.median(column) for column in zip(*samples, strict=True))
    return wall, cpu, server


def get(client: Any, path: str) -> Callable[[], None]:
    def fetch() -> None:
        response = client.get(path)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code}")

    return fetch


def post(client: Any, path: str, data: dict[str, str]) -> Callable[[], None]:
    def send() -> None:
        response = client.post(path, data)
        if response.status_code != 302:
            raise RuntimeError(f"POST {path}: {response.status_code}")

    return send


def measure(client: Any, r: redis.Redis, size: Size, reps: int, action_reps: int) -> dict[str, Sample]:
    from django_wurk.core import api, keys
    from django_wurk.core.engine import wurk

    out: dict[str, Sample] = {}
    print(f"[{size.label}] filling {size.processes} processes, {size.jobs:,} jobs", file=sys.stderr)
    r.flushdb()
    fill_processes(r, size.processes)
    fill_queues(r, size.jobs)
    per_queue = size.jobs // QUEUES
    last = -(-per_queue // 25)
    pages = {
        "dashboard: index": url("changelist"),
        "dashboard: stats JSON": url("stats"),
        "dashboard: queues": url("queues"),
        "dashboard: busy": url("busy"),
        "dashboard: one queue, first page": url("queue", name="q0"),
        "dashboard: one queue, middle page": url("queue", name="q0") + f"?page={max(last // 2, 1)}",
        "dashboard: one queue, last page": url("queue", name="q0") + f"?page={last}",
    }
    for label, path in pages.items():
        out[label] = median_time(r, get(client, path), reps)
    # A delete whose job has gone (run meanwhile) looks through the queue before saying so.
    gone = {"name": "q0", "digest": "0" * 32, "position": "0"}
    out["dashboard: delete a job no longer in the queue"] = median_time(
        r, post(client, url("queue_delete"), gone), reps
    )
    # The oldest job of a queue, the last one a search from the head reaches.
    oldest = api.JobRecord(r.lindex(keys.queue("q0"), -1) or b"").jid
    out["api: Queue.find_job(oldest jid)"] = median_time(
        r, lambda: api.Queue("q0", wurk).find_job(oldest), reps
    )
    out["api: Stats()"] = median_time(r, lambda: api.Stats(wurk), reps)
    out["api: queue_summaries()"] = median_time(r, lambda: api.queue_summaries(wurk), reps)
    out["api: list(ProcessSet())"] = median_time(r, lambda: list(api.ProcessSet(wurk)), reps)
    out["api: list(Workers())"] = median_time(r, lambda: list(api.Workers(wurk)), reps)

    print(f"[{size.label}] filling retry and dead sets of {size.entries:,}", file=sys.stderr)
    r.flushdb()
    retry_rows = set_rows(size.entries, dead=False)
    dead_rows = set_rows(size.entries, dead=True)
    fill_set(r, keys.RETRY, retry_rows)
    fill_set(r, keys.DEAD, dead_rows)
    last = -(-size.entries // 25)
    wanted = api.JobRecord(retry_rows[size.entries // 2][0]).jid
    for slug in ("retries", "dead"):
        base = url(slug)
        for where, page in (("first", 1), ("middle", max(last // 2, 1)), ("last", last)):
            out[f"dashboard: {slug}, {where} page"] = median_time(r, get(client, f"{base}?page={page}"), reps)
        out[f"dashboard: {slug}, search one jid"] = median_time(r, get(client, f"{base}?q={wanted}"), reps)
    retries = api.RetrySet(wurk)
    for where, start in (("first", 0), ("middle", size.entries // 2), ("last", size.entries - 25)):
        out[f"api: RetrySet.page, {where}"] = median_time(r, lambda s=start: retries.page(s, 25), reps)  # type: ignore[misc]
    out["api: RetrySet.find_job(jid)"] = median_time(r, lambda: retries.find_job(wanted), reps)

    def refill(key: str, rows: list[tuple[bytes, float]]) -> Callable[[], None]:
        def again() -> None:
            r.flushdb()
            fill_set(r, key, rows)

        return again

    def everything(kind: str, action: str) -> Callable[[], None]:
        """The dashboard's "retry all" (etc.) button, confirmed."""
        return post(client, url("all", kind=kind), {"action": action, "confirm": "yes"})

    retry, dead = (keys.RETRY, retry_rows), (keys.DEAD, dead_rows)
    actions: list[tuple[str, Callable[[], object], tuple[str, list[tuple[bytes, float]]]]] = [
        ("dashboard: retries, retry all", everything("retries", "retry_all"), retry),
        ("dashboard: retries, kill all", everything("retries", "kill_all"), retry),
        ("dashboard: retries, delete all", everything("retries", "delete_all"), retry),
        ("dashboard: dead, retry all", everything("dead", "retry_all"), dead),
        ("dashboard: dead, delete all", everything("dead", "delete_all"), dead),
        ("api: RetrySet.retry_all()", lambda: api.RetrySet(wurk).retry_all(), retry),
        ("api: RetrySet.kill_all()", lambda: api.RetrySet(wurk).kill_all(), retry),
        ("api: RetrySet.clear_all()", lambda: api.RetrySet(wurk).clear_all(), retry),
        ("api: DeadSet.retry_all()", lambda: api.DeadSet(wurk).retry_all(), dead),
    ]
    for label, act, (key, rows) in actions:
        print(f"[{size.label}] {label}", file=sys.stderr)
        out[label] = median_time(r, act, action_reps, before=refill(key, rows))
        if r.zcard(key) != 0:
            raise RuntimeError(f"{label} left {r.zcard(key)} entries in {key}")
    refill(keys.RETRY, retry_rows)()
    tracemalloc.start()
    api.RetrySet(wurk).retry_all()
    out["api: RetrySet.retry_all() peak traced MB"] = (tracemalloc.get_traced_memory()[1] / 1e6, 0.0, 0.0)
    tracemalloc.stop()
    r.flushdb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="big = 100k jobs and sets of 10k")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each page (median)")
    parser.add_argument("--server", choices=["redis", "valkey"], default="redis")
    opts = parser.parse_args()
    big = QUICK_BIG if opts.quick else BIG

    server = RedisServer(opts.server)
    server.start()
    try:
        os.environ["WURK_REDIS_URL"] = server.url
        client = setup_django(server.url)
        r = redis.Redis.from_url(server.url)
        started = loadavg()
        small = measure(client, r, SMALL, opts.reps, 3)
        large = measure(client, r, big, opts.reps, 1)
        ended = loadavg()
    finally:
        server.stop()

    print(f"\n{server.description}; load average before {started}, after {ended}\n")
    print(
        f"small: {SMALL.processes} processes, {SMALL.jobs:,} jobs in {QUEUES} queues, "
        f"sets of {SMALL.entries:,}; "
        f"big: {big.processes} processes, {big.jobs:,} jobs, sets of {big.entries:,}. "
        f"Pages: median of {opts.reps}; bulk actions: median of 3 (small), 1 (big).\n"
    )
    print("| operation | small | big | big / small | big: web process CPU | big: Redis CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for label in small:
        a, b = small[label][0], large[label][0]
        if label.endswith("MB"):
            print(f"| {label} | {a:.1f} MB | {b:.1f} MB | {b / a:.1f}x | | |")
        else:
            cpu, server_cpu = large[label][1:]
            print(
                f"| {label} | {a * 1000:.1f} ms | {b * 1000:.1f} ms | {b / a:.1f}x "
                f"| {cpu * 1000:.0f} ms | {server_cpu * 1000:.0f} ms |"
            )


if __name__ == "__main__":
    main()
