from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobsapp"
    label = "jobsapp"

    def ready(self) -> None:
        # Not a "jobs" module (autodiscovered): imported here so runwurk subprocesses know them.
        from tests.jobsapp import batch_jobs  # noqa: F401
        # The Celery-named tasks the Celery drain's tests move messages to (drain and worker processes).
        from tests.jobsapp import celery_drain_tasks  # noqa: F401
