"""Settings for the django-wurk example project.

Everything that differs between machines comes from the environment (read with
django-environ), with defaults that suit a developer's laptop:

- ``DEBUG`` (default: on)
- ``SECRET_KEY`` (default: an insecure key that is fine for this demo only)
- ``DATABASE_URL`` (default: the SQLite file ``example_project/db.sqlite3``)
- ``ALLOWED_HOSTS`` (default: ``127.0.0.1,localhost,[::1]``)
- ``WURK_REDIS_URL`` or ``REDIS_URL`` (default: ``redis://127.0.0.1:6379/0``)
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
    "demo",
]

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

# django-wurk: the worker (manage.py runwurk) and the web process must use the same Redis.
WURK = {
    "REDIS_URL": env("WURK_REDIS_URL", default=env("REDIS_URL", default="redis://127.0.0.1:6379/0")),
}

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
