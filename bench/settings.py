"""Minimal Django settings for benchmarks: the engine plus one app of no-op jobs."""

import os

SECRET_KEY = "bench-only-not-secret"
USE_TZ = True
INSTALLED_APPS = ["django_wurk", "bench.benchapp"]
DATABASES: dict[str, dict[str, str]] = {}
WURK = {"REDIS_URL": os.environ.get("WURK_REDIS_URL", "redis://127.0.0.1:6379/0")}
LOGGING_CONFIG = None

# The no-hiredis systems (bench/systems/wurk.py) hide hiredis; the others expect it when it
# is installed. Checked here, in every worker and client process, so that a row labelled
# "no hiredis" cannot silently measure hiredis (or the other way round).
_HIREDIS = os.environ.get("BENCH_HIREDIS")
if _HIREDIS:
    from redis.utils import HIREDIS_AVAILABLE

    if (_HIREDIS == "on") != HIREDIS_AVAILABLE:
        raise RuntimeError(
            f"BENCH_HIREDIS={_HIREDIS} but redis.utils.HIREDIS_AVAILABLE is {HIREDIS_AVAILABLE}"
            " in this process"
        )
