"""The exceptions Celery code catches, under Celery's names."""

from __future__ import annotations

from datetime import datetime

from django_wurk.core.features.timeouts.errors import SoftTimedOut, TimedOut


class CeleryError(Exception):
    """Base of the errors this layer raises itself."""


class TaskPredicate(CeleryError):
    """Base of the exceptions that steer a task's outcome rather than report an error."""


class Retry(TaskPredicate):
    """Raised by ``self.retry()``: the run ends and the job goes to the retry set.

    ``when`` is the delay in seconds (or the ETA as a datetime); ``exc`` the error that
    caused the retry, if any. The worker counts it as a retry, never as the task's failure.
    """

    def __init__(
        self,
        message: str | None = None,
        exc: BaseException | None = None,
        when: float | datetime | None = None,
    ) -> None:
        self.message = message
        self.exc = exc
        self.when = when
        super().__init__(message, exc, when)

    def humanize(self) -> str:
        if isinstance(self.when, (int, float)):
            return f"in {self.when}s"
        return f"at {self.when}"

    def __str__(self) -> str:
        if self.message:
            return self.message
        if self.exc is not None:
            return f"Retry {self.humanize()}: {self.exc!r}"
        return f"Retry {self.humanize()}"


RetryTaskError = Retry


class MaxRetriesExceededError(CeleryError):
    """``self.retry()`` was called once ``max_retries`` retries had already run."""


class TimeoutError(CeleryError):
    """``AsyncResult.get(timeout=...)`` gave up before the task finished."""


class TaskRevokedError(CeleryError):
    """The task did not run: it expired before a worker reached it."""


class NotRegistered(CeleryError, KeyError):
    """No task is registered under that name."""


class ImproperlyConfigured(CeleryError):
    """A task option or call option has a value this layer cannot use."""


class RemoteTaskError(CeleryError):
    """A task's failure read back from its result, when its own class cannot be used here.

    ``AsyncResult.get()`` re-raises the stored exception as its own class only when that
    class is already imported in this process and is an ``Exception``; otherwise as a
    subclass of this one named like it, carrying the message. Nothing is ever unpickled.
    """


class TimeLimitExceeded(TimedOut):
    """The task ran past its ``time_limit``: it was stopped, and its result is this FAILURE.

    Raised inside the task by the timeouts watchdog (``core/features/timeouts``), as the
    job's ``TimedOut``; a task blocked in C code is failed with it without its thread.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (f"the task ran longer than its time_limit of {self.limit:g} s",)))


class SoftTimeLimitExceeded(SoftTimedOut):
    """The task ran past its ``soft_time_limit``: raised once inside it, to be caught.

    ``except SoftTimeLimitExceeded:`` lets the task clean up and return, as in Celery;
    uncaught, it is the task's FAILURE.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (f"the task ran longer than its soft_time_limit of {self.limit:g} s",)))


class UnsupportedOptionWarning(UserWarning):
    """A Celery option was accepted but has no effect here (``priority``)."""


__all__ = [
    "CeleryError",
    "ImproperlyConfigured",
    "MaxRetriesExceededError",
    "NotRegistered",
    "RemoteTaskError",
    "Retry",
    "RetryTaskError",
    "SoftTimeLimitExceeded",
    "TaskPredicate",
    "TaskRevokedError",
    "TimeLimitExceeded",
    "TimeoutError",
    "UnsupportedOptionWarning",
]
