from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobsapp"
    label = "jobsapp"

    def ready(self) -> None:
        # Not "jobs" modules (autodiscovered): imported here so runwurk subprocesses know them.
        # celery_drain_tasks: the Celery-named tasks the Celery drain's tests move messages to;
        # celery_limit_tasks: a Celery task past its time_limit in a runwurk -P 2 child.
        from tests.jobsapp import (  # noqa: F401
            batch_jobs,
            celery_drain_tasks,
            celery_limit_tasks,
            collapse_jobs,
            limiter_jobs,
            unique_jobs,
        )
