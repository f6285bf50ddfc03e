"""A routine: one background thread that does one thing every few seconds, whatever happens.

The poller, the reaper, the leader's campaign and its duties are routines. Each pass may
meet a Redis outage (reported once through the shared ``Outage``, then retried on the next
pass) or a bug (logged and sent to the error handlers); neither ends the routine, which
stops only when it is told to. (Not to be confused with a periodic job's ``Loop``.)
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from django_wurk.core.worker.outage import Outage

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk

logger = logging.getLogger("django_wurk.routine")


class Routine:
    #: Thread name and the context error handlers receive.
    name = "routine"

    def __init__(self, wurk: Wurk, outage: Outage) -> None:
        self.wurk = wurk
        self.config = wurk.config
        self.outage = outage
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"wurk-{self.name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)

    def tick(self) -> None:
        """One pass."""
        raise NotImplementedError

    def initial_wait(self) -> float:
        return self.interval()

    def interval(self) -> float:
        raise NotImplementedError

    def run(self) -> None:
        self.stopping.wait(self.initial_wait())
        while not self.stopping.is_set():
            try:
                self.tick()
                self.outage.recovered()
            except RedisError as exc:
                self.outage.failed(exc)
            except Exception as exc:
                logger.exception("%s pass failed", self.name)
                self.wurk.report_error(exc, {"context": self.name})
            self.stopping.wait(self.interval())
