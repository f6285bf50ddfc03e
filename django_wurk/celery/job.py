"""The wurk job behind each Celery task: what a worker runs when it fetches one.

Every task gets its own registered ``Job`` class whose wire name is the task's Celery name
(``proj.tasks.add``), so the dashboard names it, and only tasks defined in code ever run:
a payload never chooses what to import.

Its payload has ``"retry": 0``: in Celery an exception the task does not turn into a retry
(``self.retry()``, ``autoretry_for``) is a FAILURE, so here it goes straight to the dead set,
where it can still be retried by hand. A retry the task asks for is a ``Retry`` exception,
which ``retry_requested`` hands to the engine as an exact delay: the job lands in the retry
set (``retry_count`` counts Celery's retries) and comes back at that time.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from django_wurk.celery.exceptions import Retry
from django_wurk.core.job import Job

if TYPE_CHECKING:
    from django_wurk.celery.task import Task


class CeleryJob(Job, abstract=True):
    task: ClassVar[Task]
    retry = 0

    def perform(self, *args: Any) -> Any:
        return type(self).task.execute(self, list(args))

    def retry_requested(self, exc: BaseException) -> float | None:
        if not isinstance(exc, Retry):
            return None
        when = exc.when
        if isinstance(when, datetime):
            return max(when.timestamp() - time.time(), 0.0)
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            return max(float(when), 0.0)
        return 0.0
