"""The worker's text log layout (Sidekiq's), which the per-job lines pay for on every job."""

from __future__ import annotations

import logging
import os
import threading

from django_wurk.logging import TextFormatter


def record(created: float, **context: str) -> logging.LogRecord:
    made = logging.getLogger("django_wurk.job").makeRecord(
        "django_wurk.job", logging.INFO, __file__, 1, "done: %.3f sec", (0.0012,), None, extra=context
    )
    made.created = created
    made.msecs = (created - int(created)) * 1000
    return made


def test_a_job_line_has_sidekiqs_layout_and_a_fresh_stamp_each_second() -> None:
    formatter = TextFormatter()
    prefix = f"pid={os.getpid()} tid={threading.get_ident():x}"
    job = {"jid": "0123456789abcdef01234567", "job_class": "NoopJob", "queue": "default"}
    assert formatter.format(record(1764594000.25, **job)) == (
        f"2025-12-01T13:00:00.250Z {prefix} jid=0123456789abcdef01234567 class=NoopJob queue=default"
        " INFO: done: 0.001 sec"
    )
    assert formatter.format(record(1764594000.5, queue="q")) == (
        f"2025-12-01T13:00:00.500Z {prefix} queue=q INFO: done: 0.001 sec"
    )
    # The next second (and an earlier one) gets its own stamp, not the one kept from before.
    assert formatter.format(record(1764594001.0)).startswith(f"2025-12-01T13:00:01.000Z {prefix} INFO:")
    assert formatter.format(record(1764593999.999, jid="")).startswith(
        f"2025-12-01T12:59:59.999Z {prefix} INFO:"
    )
