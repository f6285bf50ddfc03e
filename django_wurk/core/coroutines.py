"""Async jobs: each thread that runs jobs keeps one event loop for them.

A job's ``perform`` may be ``async def`` (or return any awaitable): its run is over when the
awaitable is, and only then is it a success or a failure. The loop is made on a thread's
first async job and kept for the next ones, so a client bound to a loop (an HTTP pool, an
async database driver) serves every job of that thread instead of failing on the second
one; a processor closes its loop when its thread ends.

Decisions: an awaitable returned by a plain ``def`` is run too (it is what an ``async def``
returns, and dropping it would report success for code that never ran). A thread that is
already running a loop cannot block on another one, so running an async job inline from
async code raises instead of deadlocking; such code should ``await`` the function itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("django_wurk.processor")

_thread = threading.local()
#: Each thread's job loop by thread id, so a hard shutdown can wake a loop that sleeps.
_loops: dict[int, asyncio.AbstractEventLoop] = {}


def run(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to its end on this thread's loop and return its result."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # it will never run; say so here, not in a "never awaited" warning
        raise RuntimeError(
            "an async job cannot be run from a thread with a running event loop "
            "(perform_inline or a testing mode called from async code); await the job's function "
            "directly, or enqueue it with perform_async"
        )
    runner: asyncio.Runner | None = getattr(_thread, "runner", None)
    if runner is None:
        # Our own loop factory: the thread's "current loop" (get_event_loop) stays untouched.
        runner = _thread.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        _loops[threading.get_ident()] = runner.get_loop()
    # The caller's context, not the one the runner copied when it was made: middleware may
    # have set context variables (a request id, a log field) for this job.
    return runner.run(_await(awaitable), context=contextvars.copy_context())


def close_thread_loop() -> None:
    """Close this thread's job loop, if it has one (its pending tasks are cancelled first)."""
    runner: asyncio.Runner | None = getattr(_thread, "runner", None)
    if runner is not None:
        _thread.runner = None
        _loops.pop(threading.get_ident(), None)
        try:
            runner.close()
        except Exception:  # the thread is ending either way; say why its loop did not close cleanly
            logger.exception("closing this thread's event loop for async jobs failed")


def wake(thread: threading.Thread) -> None:
    """Make ``thread``'s job loop run a step now, if it is waiting for a timer or a socket.

    A hard shutdown raises ``Shutdown`` in a job thread, which a thread waiting inside the
    loop's ``select`` only sees once that returns (maybe minutes later); waking the loop
    lets the async job be interrupted at once, like a sync job between two lines.
    """
    loop = _loops.get(thread.ident or -1)
    if loop is not None:
        with contextlib.suppress(RuntimeError):  # closed meanwhile: nothing to wake
            loop.call_soon_threadsafe(_nothing)


def _nothing() -> None:
    pass


async def _await(awaitable: Awaitable[T]) -> T:
    """Any awaitable as a coroutine, which is what a runner takes."""
    return await awaitable


def settle(result: Any, where: str) -> Any:
    """What a job's ``perform`` returned, with any awaitable run to its end.

    A generator is refused: its body runs only when iterated, which no worker does.
    """
    while inspect.isawaitable(result):
        result = run(result)
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        raise TypeError(f"{where} returned a generator, so its body never ran; a job must not use 'yield'")
    return result
