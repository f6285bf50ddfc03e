"""What steers a job thread from outside the job, told apart from what a job itself raises.

A job may raise anything, ``BaseException`` included: ``sys.exit()`` in code written for
the command line, argparse given bad input, a ``KeyboardInterrupt`` a library re-raises, a
generator's ``GeneratorExit``. None of that is the worker's business: it is the job's
failure, recorded under its retry rules like a ``ValueError`` (Sidekiq rescues Ruby's
``Exception``, ``SystemExit`` included, the same way). Letting it through would end the
processor thread with its job unrecorded, neither retried nor acknowledged.

The worker raises a few ``BaseException``s of its own into or out of a job thread: the
hard shutdown's ``Shutdown`` and ``Abandoned`` (the job was settled for its thread, see
``JobControl.abandon``). A feature may raise two more out of a job: ``PutBack`` (iterable
jobs' ``Interrupted`` is one) and ``Cancelled`` (the cancel feature's). They derive from
``WorkerSignal`` so one ``except WorkerSignal`` tells them from a job's own exit.

These are the only words the processor and a feature share about how a job ends: the
processor knows no feature (an import-linter contract and ``tests/test_import_graph.py``
say so), and a feature that ends jobs in its own way (timeouts, iterable jobs) does it
through them, through ``stopping()``, or through the process's ``JobControl``. So Dramatiq's
actors raise ``Retry`` or ``SkipMessage`` and its worker needs to know no middleware.
"""

from __future__ import annotations

import threading


class WorkerSignal(BaseException):
    """Raised by the worker to steer a job thread; never a job's own outcome."""


class PutBack(WorkerSignal):
    """Raised by a job that must run again later, from where it saved its place.

    The processor puts the job back at the head of its queue as it was fetched, so it runs
    next, here or elsewhere. It is not a failure: no retry is counted, no error reported, no
    stat counted. A ``BaseException`` (through ``WorkerSignal``), so that middleware catching
    ``Exception`` does not record it as a failure either. Features subclass it with their
    own name and meaning (``django_wurk.iterable.Interrupted``).

    ``behind=True`` puts the job behind the jobs already waiting in its queue instead (the
    end fetched last), as Sidekiq's re-enqueue does: for a job that is not leaving because
    the worker stops but because it has had its turn (an iterable job past its
    ``max_iteration_runtime``), so the jobs that waited run before it goes on.
    """

    def __init__(self, *args: object, behind: bool = False) -> None:
        super().__init__(*args)
        self.behind = behind


class Cancelled(WorkerSignal):
    """The job was cancelled (``django_wurk.cancel``): it ends here, and that is its outcome.

    Raised at the job's start when its cancel flag is set (it never runs), by a job that saw
    ``current_job().cancelled`` and returned, or into a job that did not stop within the
    grace. The processor acknowledges it: no failure, no retry, no dead entry, no
    ``stat:failed``; the middleware it passes out through record it as cancelled (job
    status, a batch's count, a unique lock's release). A ``WorkerSignal``, so that
    middleware and jobs catching ``Exception`` do not take it for a failure.
    """


#: The stop flag of the worker running a job on this thread, for ``stopping()``.
_current = threading.local()


def watch_stop(flag: threading.Event) -> None:
    """Make ``flag`` the answer of ``stopping()`` on this thread (a processor's, at its start)."""
    _current.stopping = flag


def stopping() -> bool:
    """Whether the worker running this job is stopping (TERM), so a long job should save and leave.

    False outside a worker (inline runs, tests) and while it is only quiet (TSTP): quiet
    lets running jobs finish.
    """
    flag: threading.Event | None = getattr(_current, "stopping", None)
    return flag is not None and flag.is_set()


class JobExit(Exception):
    """A job raised a ``BaseException`` that is not an ``Exception`` and not the worker's.

    The job failed: the original is this error's ``__cause__`` (only there, so that what
    cleans a failure's chain, encryption's ``conceal``, cleans it too), and the retry and
    dead sets read ``JobExit`` with the original's class and message, e.g. ``SystemExit: 2``.
    An ``Exception``, so every middleware, error handler and retry rule sees a failure.
    """

    def __init__(self, original: BaseException) -> None:
        text = str(original)
        super().__init__(f"{type(original).__name__}: {text}" if text else type(original).__name__)


def contain(exc: BaseException) -> Exception:
    """``exc`` if it is an ordinary failure, else the ``JobExit`` that stands for it.

    Never called with a ``WorkerSignal``: those pass through untouched."""
    return exc if isinstance(exc, Exception) else JobExit(exc)
