"""Celery's ``get_task_logger``: ``from django_wurk.celery.utils.log import get_task_logger``."""

from __future__ import annotations

import logging


def get_task_logger(name: str) -> logging.Logger:
    """The logger named ``name``, as Celery's (which also re-parents it under ``celery.task``;
    here a task's log goes where the module's would: configure it by the module's name)."""
    return logging.getLogger(name)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


__all__ = ["get_logger", "get_task_logger"]
