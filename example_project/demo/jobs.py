"""The demo's jobs. django-wurk finds this module because ``demo`` is an installed app.

The nightly report is the shop's, in ``orders/jobs.py``; so are the jobs placing an order
enqueues (a confirmation email and a flaky shipping API call).
"""

import logging
import time

from django_wurk import Job, job

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
