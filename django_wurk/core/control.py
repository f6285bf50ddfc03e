"""What steers a job thread from outside the job, told apart from what a job itself raises.

A job may raise anything, ``BaseException`` included: ``sys.exit()`` in code written for
the command line, argparse given bad input, a ``KeyboardInterrupt`` a library re-raises, a
generator's ``GeneratorExit``. None of that is the worker's business: it is the job's
failure, recorded under its retry rules like a ``ValueError`` (Sidekiq rescues Ruby's
``Exception``, ``SystemExit`` included, the same way). Letting it through would end the
processor thread with its job unrecorded, neither retried nor acknowledged.

The worker raises a few ``BaseException``s of its own into or out of a job thread: the
hard shutdown's ``Shutdown``, ``Interrupted`` (a long job leaving early because the worker
stops) and ``Abandoned`` (the job was settled for its thread). They derive from
``WorkerSignal`` so one ``except WorkerSignal`` tells them from a job's own exit.
"""

from __future__ import annotations


class WorkerSignal(BaseException):
    """Raised by the worker to steer a job thread; never a job's own outcome."""


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
