"""Database models: the outbox that makes an enqueue part of a transaction, and the
dashboard's permission anchor."""

from __future__ import annotations

from django.db import models


class OutboxEntry(models.Model):
    """A job written in the same transaction as the data it is about.

    Rows exist only between a commit and the push to Redis (normally milliseconds); one
    that outlives that moment (the process died, Redis was down) is pushed by the relay
    in a worker. ``payload`` is the job's JSON as the client built it (jid included), so
    the jid returned at enqueue time is the jid that runs.
    """

    id = models.BigAutoField(primary_key=True)
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
