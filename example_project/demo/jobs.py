"""The demo's jobs. django-wurk finds this module because ``demo`` is an installed app.

The nightly report is the shop's, in ``orders/jobs.py``; so are the jobs placing an order
enqueues (a confirmation email and a flaky shipping API call).
"""

import logging
import time

from django_wurk import Job, current_status, job, limiter

logger = logging.getLogger(__name__)


@job(queue="default")
def quick(n: int = 0) -> None:
    """Does nothing but say it ran."""
    logger.info("quick job #%s ran", n)


class Slow(Job):
    """Sleeps for the number of seconds it is given, to show a job that takes a while."""

    queue = "default"

    def perform(self, seconds: float) -> None:
        logger.info("slow job: sleeping %s s", seconds)
        time.sleep(seconds)
        logger.info("slow job: done after %s s", seconds)


@job(queue="default", retry=3)
def flaky() -> None:
    """Always fails, so the retry set (and then the dead set) has something in it."""
    raise RuntimeError("demo failure: the 'flaky' job always raises, to show retries")


#: The demo's rate limiter: at most 2 geocoding calls at a time across every worker, so the
#: dashboard's Limits tab has one in use (and some jobs wait on it).
GEOCODER = limiter.concurrent("demo-geocoder", 2, wait_timeout=1, lock_timeout=30)


@job(queue="default")
def geocode(address: str) -> None:
    """Calls a (pretend) geocoding API that allows two calls at once."""
    with GEOCODER.within_limit():
        time.sleep(1.0)
        logger.info("geocoded %s", address)


@job(queue="default", track=True)
def export(rows: int = 5) -> dict[str, str]:
    """A tracked job: its progress and result show on the dashboard's job status page."""
    status = current_status()
    for i in range(rows):
        time.sleep(0.5)
        status.set(progress=100 * (i + 1) / rows, message=f"row {i + 1} of {rows}")
    return {"file": f"/exports/demo-{rows}.csv"}
