"""Log formatting for workers: readable text, or one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

#: Attributes our loggers put on records through ``extra=`` (job context).
CONTEXT_FIELDS = ("jid", "job_class", "queue")
#: Each field with the name the text layout gives it (Sidekiq's ``class``).
_CONTEXT_LABELS = tuple((name, "class" if name == "job_class" else name) for name in CONTEXT_FIELDS)
#: Set on a job's last line only (seconds, and ``done`` or ``fail``); JSON logs carry them in
#: ``ctx`` so a log shipper can chart them, text logs already say them in the message.
OUTCOME_FIELDS = ("duration", "outcome")


class TextFormatter(logging.Formatter):
    """``2026-11-29T16:00:00.123Z pid=1 tid=abc jid=Y class=X queue=Q INFO: done: 0.001 sec``.

    Sidekiq's layout, so log tooling built for Sidekiq reads it too."""

    def __init__(self) -> None:
        super().__init__()
        #: (whole second, its text): with per-job lines, most records share their second.
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        second, stamp = self._second  # one tuple: threads never see a second with another's text
        if int(record.created) != second:
            second = int(record.created)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, stamp)
        ctx = ""
        fields = record.__dict__
        for name, label in _CONTEXT_LABELS:
            value = fields.get(name)
            if value:
                ctx += f" {label}={value}"
        line = (
            f"{stamp}.{int(record.msecs):03d}Z pid={os.getpid()} tid={threading.get_ident():x}"
            f"{ctx} {record.levelname}: {record.getMessage()}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


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


def configure(level: int, fmt: str = "text", logfile: str | None = None) -> None:
    """Send ``django_wurk`` logs to stderr (or ``logfile``), replacing handlers we added before."""
    handler: logging.Handler = logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.set_name("django_wurk")
    root = logging.getLogger("django_wurk")
    for old in [h for h in root.handlers if h.get_name() == "django_wurk"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
