"""Celery's ``celery.utils`` paths a project imports (``celery.utils.log``)."""
