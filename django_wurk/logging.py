"""Log formatting for workers: readable text, or one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import weakref
from typing import Any

#: Attributes our loggers put on records through ``extra=`` (job context).
CONTEXT_FIELDS = ("jid", "job_class", "queue")
#: Each field with the name the text layout gives it (Sidekiq's ``class``).
_CONTEXT_LABELS = tuple((name, "class" if name == "job_class" else name) for name in CONTEXT_FIELDS)
#: Set on a job's last line only (seconds, and ``done`` or ``fail``); JSON logs carry them in
#: ``ctx`` so a log shipper can chart them, text logs already say them in the message.
OUTCOME_FIELDS = ("duration", "outcome")
#: This process's id, for every text line (a system call each time otherwise); reset by ``fork``.
_pid = os.getpid()
#: Thread id -> its lines' `` pid=... tid=...`` text; emptied by ``fork`` (a new pid).
_who: dict[int, str] = {}


class TextFormatter(logging.Formatter):
    """``2026-11-29T16:00:00.123Z pid=1 tid=abc jid=Y class=X queue=Q INFO: done: 0.001 sec``.

    Sidekiq's layout, so log tooling built for Sidekiq reads it too."""

    def __init__(self) -> None:
        super().__init__()
        #: (whole second, its text): with per-job lines, most records share their second.
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        line = self._line(
            record.created, record.msecs, record.__dict__, record.levelname, record.getMessage()
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line

    def job_line(self, created: float, msecs: float, message: str, context: dict[str, Any]) -> str:
        """The line ``format`` makes of an INFO record with these attributes (``created``,
        ``msecs``, the message, ``context`` as ``extra=``), without the record."""
        return self._line(created, msecs, context, "INFO", message)

    def _line(self, created: float, msecs: float, fields: dict[str, Any], level: str, message: str) -> str:
        second, stamp = self._second  # one tuple: threads never see a second with another's text
        if int(created) != second:
            second = int(created)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, stamp)
        jid = fields.get("jid")
        job_class = fields.get("job_class")
        queue = fields.get("queue")
        if jid and job_class and queue:  # a job's line: all three, in one go
            ctx = f" jid={jid} class={job_class} queue={queue}"
        else:
            ctx = ""
            for name, label in _CONTEXT_LABELS:
                value = fields.get(name)
                if value:
                    ctx += f" {label}={value}"
        ident = threading.get_ident()
        who = _who.get(ident)
        if who is None:
            who = _thread_text(ident)
        return f"{stamp}.{int(msecs):03d}Z{who}{ctx} {level}: {message}"


def _thread_text(ident: int) -> str:
    """`` pid=<pid> tid=<ident in hex>``, kept per thread: the same text on every line it writes."""
    if len(_who) >= 1024:  # thread ids are reused; a process starting threads without end stays bounded
        _who.clear()
    text = _who[ident] = f" pid={_pid} tid={ident:x}"
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``pid``, ``tid``, ``lvl``, ``logger``, ``msg`` and ``ctx``."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "pid": os.getpid(),
            "tid": f"{threading.get_ident():x}",
            "lvl": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = {name: getattr(record, name) for name in CONTEXT_FIELDS if getattr(record, name, None)}
        for name in OUTCOME_FIELDS:
            if hasattr(record, name):
                ctx[name] = getattr(record, name)
        if ctx:
            data["ctx"] = ctx
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


#: Lines queued behind a write under way beyond which a logging thread waits for that write.
QUEUED_AT_MOST = 10_000


class _Combining(logging.StreamHandler):  # type: ignore[type-arg]
    """Format on the logging thread, then write lines from several threads in one go.

    ``Handler.handle`` holds the handler's lock across the write and its flush, a system call
    that lets go of the GIL: with ten job threads logging two lines per job, the other
    threads pile up on that lock while the writer waits to get the GIL back (a profile of
    a worker with per-job lines spent a quarter of its samples in ``Handler.acquire``).
    Here a thread formats its record without any lock (formatters are thread-safe: the
    ``tid`` it prints is read on that thread), queues the line under a lock that is never
    held across I/O, and, if no thread is writing, writes every queued line itself with one
    write and one flush. A thread that finds another one writing leaves its line to it.

    The bytes and their order are what one write per record would give: lines are written
    in the order they were queued, whole. When ``handle`` returns, the line is written or
    a thread that is writing will write it next; past ``QUEUED_AT_MOST`` queued lines, a
    thread waits for the write under way, so a stream that stops taking lines slows the
    job threads down as before instead of filling memory. ``emit``, ``flush`` and
    ``setStream`` work as in ``StreamHandler``; a child process made by ``fork`` starts with
    nothing queued.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._queued: list[str] = []
        self._writing = False
        self._queue_lock = threading.Lock()
        super().__init__(*args, **kwargs)
        _combining.add(self)

    def _forked(self) -> None:
        self._queued = []
        self._writing = False
        self._queue_lock = threading.Lock()

    def handle(self, record: logging.LogRecord) -> Any:
        rv = self.filter(record) if self.filters else True
        if isinstance(rv, logging.LogRecord):  # Python 3.12: a filter may hand back another record
            record = rv
        if not rv:
            return rv
        try:
            formatter = self.formatter
            line = (formatter.format(record) if formatter else self.format(record)) + self.terminator
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return rv
        self._emit_line(line, record)
        return rv

    def write_job_line(self, message: str, context: dict[str, Any]) -> bool:
        """Write a job's INFO line as ``handle`` would write its record; False if it cannot.

        For ``JobLog`` (``django_wurk.core.worker.joblog``), which calls it only when this
        handler is the one a ``django_wurk.job`` record would reach, with nothing else on
        the way (no other handler, no filter, no record factory). Then making the record
        would serve only to format it: the line is made from the same values directly.
        False when this handler would not write the line as ``TextFormatter`` does.
        """
        formatter = self.formatter
        if type(formatter) is not TextFormatter or self.filters or self.level > logging.INFO:
            return False
        ct = time.time_ns()  # as JobLog sets a record's ``created`` and ``msecs``
        line = formatter.job_line(ct / 1e9, (ct % 1_000_000_000) // 1_000_000, message, context)
        self._emit_line(line + self.terminator, None)
        return True

    def _emit_line(self, line: str, record: logging.LogRecord | None) -> None:
        with self._queue_lock:
            if self._writing:
                queued = self._queued
                queued.append(line)
                if len(queued) < QUEUED_AT_MOST:
                    return
            else:
                self._writing = True
                queued = None
        if queued is not None:
            # The stream is not keeping up (a stopped pipe reader, a full disk's retries):
            # wait for the write under way, as every thread did when the lock covered the
            # write, rather than queue lines without end while the jobs go on.
            assert self.lock is not None
            with self.lock:
                return
        try:
            self._write(line, record)
        except BaseException:
            with self._queue_lock:
                self._writing = False
            raise

    def _write(self, text: str, record: logging.LogRecord | None) -> None:
        """Write ``text``, then what was queued meanwhile, until nothing is.

        ``record`` is the one a failed write is reported with (``handleError``); a job line
        written without one is reported as a record of its text.
        """
        lock = self.lock
        assert lock is not None  # Handler.__init__ made it
        while True:
            with lock:
                try:
                    stream = self.stream
                    if stream is None:
                        stream = self._open_stream()
                    if stream:
                        stream.write(text)
                        stream.flush()
                except RecursionError:
                    raise
                except Exception:
                    self.handleError(record or logging.makeLogRecord({"msg": text.rstrip("\n")}))
            with self._queue_lock:
                queued = self._queued
                if not queued:
                    self._writing = False
                    return
                self._queued = []
            text = queued[0] if len(queued) == 1 else "".join(queued)

    def _open_stream(self) -> Any:
        return self.stream


class LineStreamHandler(_Combining):
    """A ``StreamHandler`` (stderr by default) that writes lines as ``_Combining`` does."""


class LineFileHandler(_Combining, logging.FileHandler):
    """A ``FileHandler`` that writes lines as ``_Combining`` does."""

    def _open_stream(self) -> Any:
        # FileHandler.emit's rule: open a delayed file on first use, never reopen one closed in "w" mode.
        if self.stream is None and (self.mode != "w" or not self._closed):  # type: ignore[attr-defined]
            self.stream = self._open()
        return self.stream


_combining: weakref.WeakSet[_Combining] = weakref.WeakSet()


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()
    _who.clear()
    # A thread of the parent may have been writing when it forked: the child has no such thread.
    for handler in list(_combining):
        handler._forked()


os.register_at_fork(after_in_child=_after_fork)


def configure(level: int, fmt: str = "text", logfile: str | None = None) -> None:
    """Send ``django_wurk`` logs to stderr (or ``logfile``), replacing handlers we added before."""
    handler: logging.Handler = LineFileHandler(logfile) if logfile else LineStreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.set_name("django_wurk")
    root = logging.getLogger("django_wurk")
    for old in [h for h in root.handlers if h.get_name() == "django_wurk"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
