from django_wurk.celery import shared_task


@shared_task(name="discovered.ping")
def ping() -> str:
    return "pong"
