"""``TimedOut``: the error a job that ran past its ``timeout`` fails with; ``SoftTimedOut``:
the warning raised inside a job that ran past its ``soft_timeout``, which it may catch."""

from __future__ import annotations


class TimedOut(Exception):
    """The job ran longer than its ``timeout``; it follows its retry rules like any failure.

    Raised inside the job's thread by the watchdog (where Python code runs), or recorded for
    it when the job could not be stopped (blocked in C code or a socket). ``error_class`` in
    the retry and dead sets reads ``TimedOut``.
    """

    #: The limit the job broke, in seconds (set on the class ``for_limit`` makes).
    limit: float = 0.0

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (f"the job ran longer than its timeout of {self.limit:g} s",)))


class SoftTimedOut(Exception):
    """The job ran longer than its ``soft_timeout``: raised once inside it, to be caught.

    Unlike ``TimedOut`` nothing more happens to the job: it may clean up and return (or
    raise something else). Uncaught, it fails the job like any exception. A job class may
    raise its own subclass instead (``soft_timeout_error``; the Celery layer raises Celery's
    ``SoftTimeLimitExceeded``).
    """

    limit: float = 0.0

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (f"the job ran longer than its soft timeout of {self.limit:g} s",)))


#: The classes ``for_limit`` made, by limit and base; bounded, since limits come from payloads.
_made: dict[tuple[float, type[Exception]], type[Exception]] = {}
MOST_MADE = 256


def for_limit(limit: float, base: type[Exception] = TimedOut) -> type[Exception]:
    """A subclass of ``base`` (``TimedOut`` by default) that knows ``limit``, named as ``base``.

    A class, not an instance: an exception raised in another thread (``PyThreadState_SetAsyncExc``)
    can only be given as a class, which Python instantiates without arguments.
    """
    key = (limit, base)
    made = _made.get(key)
    if made is None:
        if len(_made) >= MOST_MADE:
            _made.clear()
        made = type(
            base.__name__,
            (base,),
            {"limit": limit, "__module__": base.__module__, "__qualname__": base.__qualname__},
        )
        made = _made.setdefault(key, made)
    return made
