from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobsapp"
    label = "jobsapp"
