"""Minimal Django settings for benchmarks: the engine plus one app of no-op jobs."""

import os

SECRET_KEY = "bench-only-not-secret"
USE_TZ = True
INSTALLED_APPS = ["django_wurk", "bench.benchapp"]
DATABASES: dict[str, dict[str, str]] = {}
WURK = {"REDIS_URL": os.environ.get("WURK_REDIS_URL", "redis://127.0.0.1:6379/0")}
LOGGING_CONFIG = None
