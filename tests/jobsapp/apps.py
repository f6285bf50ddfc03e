from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobsapp"
    label = "jobsapp"

    def ready(self) -> None:
        # Not a "jobs" module (autodiscovered): imported here so runwurk subprocesses know them.
        from tests.jobsapp import (
            batch_jobs,  # noqa: F401
            unique_jobs,  # noqa: F401
        )
