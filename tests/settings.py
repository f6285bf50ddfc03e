"""Django settings for the test suite: SQLite by default, PostgreSQL when DATABASE_URL is set."""

import os

import environ

env = environ.Env()

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_wurk",
    "tests.jobsapp",
]
try:  # Django 6 ships django.tasks; on 5.2 the backport app provides it.
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")
TASKS = {
    "default": {
        "BACKEND": "django_wurk.tasks.WurkBackend",
        "QUEUES": ["default", "tasks"],
        "OPTIONS": {"RESULT_TTL": 3600},
    }
}
DATABASES = {"default": env.db("DATABASE_URL", default="sqlite://:memory:")}
# A second database, for enqueueing that follows the right transaction.
DATABASES["other"] = {**DATABASES["default"], "NAME": f"{DATABASES['default']['NAME']}_other"}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["other"]["NAME"] = ":memory:"
ROOT_URLCONF = "tests.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
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
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
WURK = {
    "REDIS_URL": os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    "QUEUES": ["default", "tasks"],
}
# The suite defines jobs in its test modules, which no worker of these settings imports (the
# test runs them in-process or through jobsapp): W005 is about such jobs, and tested on its own.
SILENCED_SYSTEM_CHECKS = ["django_wurk.W005"]
