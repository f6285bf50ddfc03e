from datetime import timedelta

from celery.schedules import crontab

SECRET_KEY = "sample-project-not-secret"
USE_TZ = True
INSTALLED_APPS = ["shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}  # no tables needed
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
CELERY_RESULT_BACKEND = "redis://127.0.0.1:6379/0"
CELERY_TIMEZONE = "Europe/Berlin"
CELERY_BEAT_SCHEDULE = {
    "nightly-sales-report": {
        "task": "shop.tasks.sales_report",
        "schedule": crontab(minute=0, hour=2),
    },
    "weekly-digest": {
        "task": "shop.tasks.sales_report",
        "schedule": crontab(minute=0, hour=8, day_of_week="mon"),
        "args": ("weekly",),
        "options": {"queue": "reports"},
    },
    "expire-carts": {
        "task": "shop.tasks.expire_carts",
        "schedule": timedelta(minutes=15),
        "args": (7,),
    },
    "refresh-exchange-rates": {
        "task": "shop.tasks.refresh_exchange_rates",
        "schedule": 30.0,
    },
}
