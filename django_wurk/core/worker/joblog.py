"""A processor thread's per-job log lines (start, done, fail) without building each record from scratch.

``Logger.info`` makes every record anew: it walks the stack for the caller, splits the
source path, asks for the thread's and the process's names, and copies ``extra`` in. With
the default per-job lines that happens twice per job, and for a noop job it cost more
than the rest of the job together (see docs/benchmarks.md, "Profiling"). Everything but
the time, the arguments and the job's context is the same for every line one thread
writes from one place, so the first line of each kind is made the usual way and kept;
each later one is a copy of its attributes with those few filled in, handed to
``Logger.handle`` as ``Logger.info`` would. Handlers, filters and formatters see a
``LogRecord`` with the same attributes and values.

When the only thing a record would reach is ``runwurk``'s own handler (no other handler,
no filter, no record factory: the default), even the copy is skipped: the handler's
``write_job_line`` makes the very line its formatter would make of the record. The engine
does not import that handler (it is Django glue); it asks whichever handler is there for
the method, and takes the record path when there is none or it declines.

A project that installs its own record factory (``logging.setLogRecordFactory``, e.g. to
stamp trace ids per record) or logger class gets ``Logger.info`` as before: its factory
must run for every record.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

_INFO = logging.INFO


class JobLog:
    """Per-job log lines of one processor thread, on ``logger`` at INFO.

    Made and used on that thread; a call from another thread (a test driving a processor
    by hand) starts a fresh set of kept records, so a line never carries another thread's id.
    """

    __slots__ = ("_kept", "_start", "_thread", "logger")

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._thread = 0
        #: (message, call site) -> the attributes of the first such record made.
        self._kept: dict[tuple[str, int], dict[str, Any]] = {}
        #: ``time.time()`` at logging's start, for ``relativeCreated`` (whatever its unit inside logging).
        self._start = 0.0

    def enabled(self) -> bool:
        return self.logger.isEnabledFor(_INFO)

    def line(self, msg: str, args: tuple[Any, ...], context: dict[str, Any]) -> None:
        """Log ``msg % args`` at INFO with ``context``'s keys as record attributes (``extra=``)."""
        logger = self.logger
        parent = logger.parent
        if (
            parent is not None
            and not logger.handlers
            and logger.propagate
            and not parent.propagate
            and len(parent.handlers) == 1
            and not logger.filters
            and not parent.filters
            and not logger.disabled
            and logging.getLogRecordFactory() is logging.LogRecord
        ):
            # runwurk's own handler (``django_wurk.logging``) is the only one the record would
            # reach: it can write the line from these values without a record being made.
            write = getattr(parent.handlers[0], "write_job_line", None)
            if write is not None and write(msg % args if args else msg, context):
                return
        caller = sys._getframe(1)
        # The call site by its bytecode offset: ``f_lineno`` scans the line table on every read.
        key = (msg, caller.f_lasti)
        kept = self._kept.get(key)
        if kept is None or self._thread != threading.get_ident():
            if logging.getLogRecordFactory() is not logging.LogRecord or type(logger).makeRecord is not (
                logging.Logger.makeRecord
            ):
                logger.info(msg, *args, extra=context, stacklevel=2)
                return
            if self._thread != threading.get_ident():
                self._thread = threading.get_ident()
                self._kept.clear()
            code = caller.f_code
            record = logger.makeRecord(
                logger.name, _INFO, code.co_filename, caller.f_lineno, msg, args, None, code.co_name
            )
            self._start = record.created - record.relativeCreated / 1000
            kept = self._kept[key] = dict(record.__dict__)
        elif logging.getLogRecordFactory() is not logging.LogRecord:
            logger.info(msg, *args, extra=context, stacklevel=2)
            return
        record = logging.LogRecord.__new__(logging.LogRecord)
        fields = kept.copy()
        fields.update(context)
        ct = time.time_ns()
        created = ct / 1e9
        fields["created"] = created
        fields["msecs"] = (ct % 1_000_000_000) // 1_000_000 + 0.0
        fields["relativeCreated"] = (created - self._start) * 1000
        fields["args"] = args
        record.__dict__ = fields
        logger.handle(record)
