"""Periodic schedules edited in the Django admin: the ``Schedule`` table, read into loops.

``WURK["PERIODIC"]`` needs a deploy to change; a ``Schedule`` row (``django_wurk.models``)
changes at run time. The engine does not know about the table: ``runwurk`` hands it a
``ScheduleSource``, which the leader calls every few seconds (``REFRESH``) on its periodic
thread, so a row added, edited, disabled or deleted fires (or stops) within that time, beside
the settings' loops, without a restart.

A row is checked twice. The admin form refuses a bad one (``periodic.schedule_problems``: the cron, the job,
the arguments against the job's signature, the queue, the time zone), so it never reaches
the leader. A row made bad behind the admin's back (an SQL ``UPDATE``, a job renamed in a
deploy) is skipped by the source with one warning per row and problem, and the other loops
go on. A database that cannot be read keeps the loops read last (``ticker.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections
from django.db.models import TextField
from django.db.models.functions import Cast

from django_wurk.core import wire
from django_wurk.core.registry import Registry
from django_wurk.periodic import find_job, schedule_problems

if TYPE_CHECKING:
    from django_wurk.core.features.periodic import LoopSpec
    from django_wurk.models import Schedule

logger = logging.getLogger("django_wurk.periodic")

#: Seconds between two reads of the table by the leader: how soon an edit fires.
REFRESH = 5.0


def loop_spec(row: Schedule, registry: Registry) -> LoopSpec:
    """The engine's loop for ``row``; ``ValueError`` saying what is wrong with it."""
    from django_wurk.core.features.periodic import DEFAULT_TZ, LoopSpec
    from django_wurk.core.features.periodic.cron import Cron, parse_timezone

    found = schedule_problems(cron=row.cron, job=row.job, args=row.args, kwargs=row.kwargs, queue=row.queue,
                     tz=row.tz, registry=registry)  # fmt: skip
    if found:
        raise ValueError("; ".join(f"{name}: {message}" for name, message in found.items()))
    job_class = find_job(row.job, registry)
    assert job_class is not None
    return LoopSpec(
        Cron.parse(row.cron),
        job_class,
        args=tuple(row.args),
        kwargs=dict(row.kwargs),
        queue=row.queue or None,
        tz=parse_timezone(row.tz) if row.tz else DEFAULT_TZ,
        source=f"schedule {row.name!r}",
    )


class ScheduleSource:
    """The engine's ``LoopSource`` over the enabled ``Schedule`` rows.

    Called on the leader's periodic thread, so it treats each read like a request: stale
    database connections are closed before and after. A row that cannot become a loop is
    left out with one warning (again only once it changed, or after a restart).
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._warned: set[tuple[int, str]] = set()
        self._table_missing_warned = False

    def __call__(self) -> list[LoopSpec]:
        from django_wurk.models import Schedule

        _close_old_connections()
        try:
            rows = list(_enabled_rows())
        except DatabaseError as exc:
            if _no_table(exc):
                if not self._table_missing_warned:
                    self._table_missing_warned = True
                    logger.warning(
                        "periodic: the %s table does not exist (run manage.py migrate); "
                        "only WURK['PERIODIC'] fires",
                        Schedule._meta.db_table,
                    )
                return []
            raise
        finally:
            _close_old_connections()
        specs: list[LoopSpec] = []
        for values in rows:
            try:
                specs.append(loop_spec(_row(values), self.registry))
            except (ValueError, TypeError, RecursionError) as exc:
                key = (values["pk"], str(exc))
                if key not in self._warned:
                    self._warned.add(key)
                    name = wire.display_text(values["name"], 200)
                    logger.warning("periodic: schedule %r (id %s) is skipped: %s", name, values["pk"], exc)
        return specs


def _enabled_rows() -> Any:
    """The enabled rows as plain values, ``args`` and ``kwargs`` as the JSON text the database
    holds: decoded per row (``_row``), so one row whose JSON cannot be read (nested past any
    sane depth, written by hand) is one skipped schedule, not a failed query for all of them."""
    from django_wurk.models import Schedule

    text = TextField()
    return (
        Schedule.objects.filter(enabled=True)
        .order_by("name")
        .annotate(args_json=Cast("args", text), kwargs_json=Cast("kwargs", text))
        .values("pk", "name", "cron", "job", "queue", "tz", "args_json", "kwargs_json")
    )


def _row(values: Mapping[str, Any]) -> Schedule:
    from django_wurk.models import Schedule

    decoded = {}
    for field in ("args", "kwargs"):
        raw = values[f"{field}_json"]
        try:
            decoded[field] = wire.decode_json(raw if raw is not None else "null", field)
        except wire.PayloadError as exc:
            raise ValueError(f"{field}: not readable JSON ({exc})") from None
    fields = {k: values[k] for k in ("pk", "name", "cron", "job", "queue", "tz")}
    return Schedule(**fields, **decoded)


def _close_old_connections() -> None:
    """Django's ``close_old_connections``, but never one inside a transaction (a caller's
    ``atomic()`` block, a test's): closing that would end the caller's transaction."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


def _no_table(exc: DatabaseError) -> bool:
    text = str(exc).lower()
    return "no such table" in text or ("relation" in text and "does not exist" in text)
