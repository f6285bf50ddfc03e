"""Database models: the outbox that makes an enqueue part of a transaction, the periodic
schedules edited in the admin, and the dashboard's permission anchor."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

#: ``OutboxEntry`` is the outbox's own storage: read and written by ``django_wurk.outbox`` only.
__all__ = ["Dashboard", "Schedule"]


def new_token() -> str:
    """128 random bits: an identity no flush, restore or second project can hand out again."""
    return secrets.token_hex(16)


class OutboxEntry(models.Model):
    """A job written in the same transaction as the data it is about.

    Rows exist only between a commit and the push to Redis (normally milliseconds); one
    that outlives that moment (the process died, Redis was down) is pushed by the relay
    in a worker. ``payload`` is the job's JSON as the client built it (jid included), so
    the jid returned at enqueue time is the jid that runs.

    ``token`` is what the exactly-once marker in Redis is keyed by. Not the id: ids start
    again after ``manage.py flush``, ``TRUNCATE ... RESTART IDENTITY`` or a restore, and
    another project on the same Redis has the same ones, so a marker left by an earlier row
    would swallow a new row's job. Rows written before the token existed got their id as
    token (migration 0003), which keeps the marker they may already have.
    """

    id = models.BigAutoField(primary_key=True)
    token = models.CharField(max_length=32, default=new_token, editable=False)
    payload = models.TextField()
    #: Epoch seconds for a scheduled job; null to push onto its queue.
    at = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "django_wurk_outbox"
        ordering = ("id",)
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"

    def __str__(self) -> str:
        return f"outbox entry {self.pk}"


class Dashboard(models.Model):
    """The anchor of the dashboard in the Django admin: no table, only permissions.

    The jobs live in Redis, so this model is never queried; it exists so that the admin lists
    a "Wurk" section and so that ``django.contrib.auth`` can grant the two permissions below
    (the migration creates them with the content type).
    """

    class Meta:
        managed = False
        db_table = "django_wurk_dashboard"  # never created
        default_permissions = ()
        permissions = (
            ("view_dashboard", "Can view the Wurk dashboard"),
            ("manage_jobs", "Can retry, delete and kill jobs, clear queues and quiet or stop processes"),
        )
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"

    def __str__(self) -> str:
        return "Wurk dashboard"


def no_arguments() -> list[Any]:
    return []


def no_keywords() -> dict[str, Any]:
    return {}


class Schedule(models.Model):
    """A periodic job edited at run time (docs/periodic.md, "Schedules in the admin").

    The fields are those of a ``WURK["PERIODIC"]`` entry, plus a ``name`` and ``enabled``.
    The leader reads the enabled rows every few seconds (``django_wurk.schedules``) and
    fires them beside the settings' entries. ``clean()`` refuses a row that could not run,
    so the admin never saves one; a row changed behind the admin's back is skipped by the
    leader with a warning.
    """

    name = models.CharField(max_length=200, unique=True, help_text="What the schedule is called.")
    cron = models.CharField(
        max_length=200,
        help_text="A cron expression: minute hour day-of-month month day-of-week, e.g. "
        "<code>*/15 * * * *</code>, or <code>@daily</code>.",
    )
    job = models.CharField(
        max_length=300,
        help_text="The job's wire name, or the dotted path of its @job function or Job class.",
    )
    args = models.JSONField(default=no_arguments, blank=True, help_text="Positional arguments: a JSON list.")
    kwargs = models.JSONField(default=no_keywords, blank=True, help_text="Keyword arguments: a JSON object.")
    queue = models.CharField(
        max_length=200, blank=True, default="", help_text="Leave empty for the job's own queue."
    )
    tz = models.CharField(
        "time zone",
        max_length=64,
        blank=True,
        default="UTC",
        help_text="An IANA time zone (<code>Europe/Paris</code>); empty means UTC.",
    )
    enabled = models.BooleanField(default=True, help_text="Only enabled schedules fire.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "django_wurk_schedule"
        ordering = ("name",)
        verbose_name = "periodic schedule"
        verbose_name_plural = "periodic schedules"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django_wurk.core.registry import registry
        from django_wurk.periodic import schedule_problems

        found = schedule_problems(cron=self.cron, job=self.job, args=self.args, kwargs=self.kwargs,
                         queue=self.queue, tz=self.tz, registry=registry)  # fmt: skip
        if found:
            raise ValidationError(found)
