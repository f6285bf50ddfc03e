"""``TimedOut``: the error a job that ran past its ``timeout`` fails with."""

from __future__ import annotations

import functools


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


@functools.lru_cache(maxsize=64)
def for_limit(limit: float) -> type[TimedOut]:
    """A ``TimedOut`` subclass that knows ``limit``, still named ``TimedOut``.

    A class, not an instance: an exception raised in another thread (``PyThreadState_SetAsyncExc``)
    can only be given as a class, which Python instantiates without arguments.
    """
    return type(
        "TimedOut",
        (TimedOut,),
        {"limit": limit, "__module__": TimedOut.__module__, "__qualname__": "TimedOut"},
    )
