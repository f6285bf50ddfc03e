"""The worker's text log layout (Sidekiq's), which the per-job lines pay for on every job."""

from __future__ import annotations

import io
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from django_wurk import logging as wurk_logging
from django_wurk.core.worker.joblog import JobLog
from django_wurk.logging import LineFileHandler, LineStreamHandler, TextFormatter
from tests.conftest import wait_for


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


def _times_apart(fields: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in fields.items() if k not in ("created", "msecs", "relativeCreated")}


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _log_both_ways(joblog: JobLog, logger: logging.Logger, context: dict[str, object]) -> None:
    # One line each, from the same function, so that the call sites differ only by line.
    logger.info("done: %.3f sec", 0.0012, extra=context)
    joblog.line("done: %.3f sec", (0.0012,), context)


def test_a_job_line_record_is_what_logger_info_makes() -> None:
    """The processor's per-job records are copies; handlers must not be able to tell."""
    logger = logging.getLogger("django_wurk.test_joblog")
    keep = _Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        joblog = JobLog(logger)
        context = {"jid": "abc", "job_class": "NoopJob", "queue": "default", "outcome": "done"}
        for _ in range(2):  # the first line makes the kept record, the second copies it
            before = time.time()
            _log_both_ways(joblog, logger, context)
            after = time.time()
            made, copied = keep.records[-2:]
            assert copied.lineno == made.lineno + 1
            assert _times_apart(vars(copied)) == {**_times_apart(vars(made)), "lineno": copied.lineno}
            assert before - 0.001 <= copied.created <= after + 0.001
            assert copied.msecs == int((copied.created - int(copied.created)) * 1000)
            assert abs(copied.relativeCreated - made.relativeCreated) < (after - before) * 1000 + 1
            assert copied.getMessage() == "done: 0.001 sec"
    finally:
        logger.removeHandler(keep)


def test_a_record_factory_still_sees_every_job_line() -> None:
    """A project's factory (trace ids, say) runs per record: the copies are not used then."""
    logger = logging.getLogger("django_wurk.test_joblog_factory")
    keep = _Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    default = logging.getLogRecordFactory()
    stamped = iter(range(100))

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        made = default(*args, **kwargs)  # type: ignore[arg-type]
        made.stamp = next(stamped)  # type: ignore[attr-defined]
        return made

    try:
        joblog = JobLog(logger)
        joblog.line("start", (), {"jid": "a"})
        logging.setLogRecordFactory(factory)
        joblog.line("start", (), {"jid": "b"})
        joblog.line("start", (), {"jid": "c"})
    finally:
        logging.setLogRecordFactory(default)
        logger.removeHandler(keep)
    assert [(r.jid, getattr(r, "stamp", None)) for r in keep.records] == [("a", None), ("b", 0), ("c", 1)]  # type: ignore[attr-defined]


def test_lines_from_many_threads_are_written_whole_and_in_each_threads_order(tmp_path: Path) -> None:
    path = tmp_path / "worker.log"
    handler = LineFileHandler(str(path))
    handler.setFormatter(logging.Formatter("%(threadName)s %(message)s"))
    logger = logging.getLogger("django_wurk.test_combining")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:

        def write(n: int) -> None:
            for i in range(500):
                logger.info("line %d of %d %s", i, n, "x" * (i % 50))

        threads = [threading.Thread(target=write, args=(n,), name=f"t{n}") for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 8 * 500
    for n in range(8):
        mine = [line for line in lines if line.startswith(f"t{n} ")]
        assert mine == [f"t{n} line {i} of {n} {'x' * (i % 50)}" for i in range(500)]


def test_a_forked_child_writes_although_the_parent_was_writing(tmp_path: Path) -> None:
    path = tmp_path / "worker.log"
    handler = LineFileHandler(str(path))
    logger = logging.getLogger("django_wurk.test_combining_fork")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler.setFormatter(TextFormatter())
    try:
        handler._writing = True  # as if another thread of the parent were writing as it forks
        pid = os.fork()
        if pid == 0:  # the child
            try:
                logger.info("from the child")
                handler.flush()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        # Written, and with the child's own pid (the formatter keeps it between lines).
        assert path.read_text().endswith(f"Z pid={pid} tid={threading.get_ident():x} INFO: from the child\n")
    finally:
        handler._writing = False
        logger.removeHandler(handler)
        handler.close()


class _HeldStream(io.StringIO):
    """A stream whose writes wait until it is let go: a pipe whose reader stopped."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.go = threading.Event()

    def write(self, text: str) -> int:
        self.entered.set()
        assert self.go.wait(30)
        return super().write(text)


def test_threads_wait_for_a_stuck_stream_once_enough_lines_are_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wurk_logging, "QUEUED_AT_MOST", 50)
    stream = _HeldStream()
    handler = LineStreamHandler(stream)
    logger = logging.getLogger("django_wurk.test_combining_stuck")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        writer = threading.Thread(target=logger.info, args=("first",))
        writer.start()
        assert stream.entered.wait(10)  # the writer is inside the stuck write

        def many() -> None:
            for i in range(80):
                logger.info("line %d", i)

        other = threading.Thread(target=many)
        other.start()
        wait_for(lambda: len(handler._queued) >= 50, timeout=10)
        assert other.is_alive() and len(handler._queued) == 50  # waiting, not queueing on
        stream.go.set()
        writer.join(10)
        other.join(10)
        assert not writer.is_alive() and not other.is_alive()
        assert stream.getvalue().splitlines() == ["first"] + [f"line {i}" for i in range(80)]
    finally:
        stream.go.set()
        logger.removeHandler(handler)


def test_a_job_line_written_without_a_record_is_the_records_line() -> None:
    formatter = TextFormatter()
    context = {"jid": "0123456789abcdef01234567", "job_class": "NoopJob", "queue": "default"}
    for created in (1764594000.25, 1764594000.999, 1764594061.0):
        made = record(created, **context, duration=0.0012, outcome="done")  # type: ignore[arg-type]
        direct = formatter.job_line(created, made.msecs, "done: 0.001 sec", {**context, "outcome": "done"})
        assert direct == formatter.format(made)
    assert formatter.job_line(1764594000.5, 500.0, "start", {"queue": "q", "jid": ""}) == formatter.format(
        record(1764594000.5, queue="q", jid="")
    ).replace("done: 0.001 sec", "start")


def test_runwurks_handler_writes_job_lines_directly_and_records_when_anything_else_listens(
    tmp_path: Path,
) -> None:
    """With runwurk's logging, a job line is written without a record; a filter (or another
    handler, or a record factory) on the way gets records again, and the same text."""
    path = tmp_path / "worker.log"
    root = logging.getLogger("django_wurk")
    saved = (list(root.handlers), root.level, root.propagate)
    wurk_logging.configure(logging.INFO, "text", str(path))
    (handler,) = [h for h in root.handlers if h.get_name() == "django_wurk"]
    seen: list[logging.LogRecord] = []

    def keep(made: logging.LogRecord) -> bool:
        seen.append(made)
        return True

    try:
        joblog = JobLog(logging.getLogger("django_wurk.job"))
        context = {"jid": "abc", "job_class": "NoopJob", "queue": "default"}
        joblog.line("start", (), context)
        handler.addFilter(keep)
        joblog.line("done: %.3f sec", (0.0012,), {**context, "outcome": "done"})
        handler.removeFilter(keep)
        joblog.line("done: %.3f sec", (0.5,), context)
    finally:
        handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]
    prefix = f"pid={os.getpid()} tid={threading.get_ident():x} jid=abc class=NoopJob queue=default INFO:"
    lines = path.read_text().splitlines()
    assert [line.split("Z ", 1)[1] for line in lines] == [
        f"{prefix} start",
        f"{prefix} done: 0.001 sec",
        f"{prefix} done: 0.500 sec",
    ]
    assert [(r.getMessage(), r.outcome) for r in seen] == [("done: 0.001 sec", "done")]  # type: ignore[attr-defined]
