"""Settings for the django-wurk example project.

Everything that differs between machines comes from the environment (read with
django-environ), with defaults that suit a developer's laptop:

- ``DEBUG`` (default: on)
- ``SECRET_KEY`` (default: an insecure key that is fine for this demo only)
- ``DATABASE_URL`` (default: the SQLite file ``example_project/db.sqlite3``)
- ``ALLOWED_HOSTS`` (default: ``127.0.0.1,localhost,[::1]``)
- ``WURK_REDIS_URL`` or ``REDIS_URL`` (default: ``redis://127.0.0.1:6379/0``), read by
  django-wurk itself, so ``WURK_REDIS_URL_FILE`` works too (see docs/secrets.md)
- ``SHIPPING_FAILURE_RATE`` (default: 0.5): how often the demo's shipping API call fails
- ``LOG_LEVEL`` (default: ``INFO``)
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=True)

# INSECURE: this default exists only so the demo runs out of the box. Never deploy with it;
# set SECRET_KEY in the environment instead.
SECRET_KEY = env.str(
    "SECRET_KEY",
    default="django-insecure-example-project-dev-only-do-not-use-in-production",
)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_wurk",
    "orders",
    "demo",
]
try:  # Django 6+ ships django.tasks; on Django 5.2 the django-tasks backport provides it.
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "example.wsgi.application"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

# django-wurk. REDIS_URL is not set here: django-wurk reads WURK_REDIS_URL (or
# WURK_REDIS_URL_FILE, or the fallback REDIS_URL) from the environment itself, and uses
# redis://127.0.0.1:6379/0 when none is set. run.py sets WURK_REDIS_URL for the web server
# and the worker, which must use the same Redis.
WURK = {
    # What `manage.py runwurk` works without -q flags (run.py passes the same two).
    "QUEUES": ["default", "reports"],
    # Look for due scheduled jobs and retries every ~2 s (instead of ~5 s after a 10-15 s
    # start-up delay), so the demo's retries and scheduled report show up promptly.
    "POLL_INTERVAL": 2.0,
}

# django.tasks: @task functions (orders/tasks.py) run on django-wurk workers, with their
# results kept in Redis. See docs/tasks.md.
TASKS = {
    "default": {
        "BACKEND": "django_wurk.tasks.WurkBackend",
        "QUEUES": ["default"],
    }
}

# Emails go to the console: the worker prints each confirmation email it "sends".
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "shop@example.com"

# How often the demo's fake shipping API fails (orders.jobs.call_shipping_api): 0 to 1.
SHIPPING_FAILURE_RATE = env.float("SHIPPING_FAILURE_RATE", default=0.5)

# Everything at INFO on the console, so the worker's log shows each job as it runs.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
        },
    },
    "root": {
        "handlers": ["console"],
        "level": env.str("LOG_LEVEL", default="INFO"),
    },
    "loggers": {
        # Replaces Django's default "django" logger, which would print some lines twice.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
