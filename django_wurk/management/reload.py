"""``runwurk --autoreload``: restart the worker when code changes, and stop it cleanly on TERM.

Django's reloader (``runserver``'s) runs the command again in a child process and starts a
new child whenever one exits with status 3 (a file changed). Used as it is, its parent turns
TERM into ``sys.exit`` while it waits in ``subprocess.run``, which answers that by killing
the child with SIGKILL: the worker never says "stopped", and its running jobs stay in its
private list until the reaper finds the process dead. So both halves are ours, around
Django's file watcher:

* the parent forwards the worker's signals (TERM, INT, TSTP, TTIN) to the child and waits
  for it, as a supervisor does; an INT or TSTP is not forwarded when it came from the
  terminal (Ctrl-C, Ctrl-Z), which sent it to the child already (both are in its
  foreground process group): a second INT would cut the stop short;
* the child answers them as a worker without ``--autoreload`` does (stop, a second stop
  signal hurrying it; quiet; thread dump), and stops the file watcher once the worker
  stopped, so the process exits on its own with status 0.

A change of code still stops the worker cleanly too: the watcher's ``sys.exit(3)`` runs the
exit handler ``runwurk`` registers for the launcher's stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from types import FrameType

from django.utils import autoreload

#: The signals a worker acts on (``Launcher``'s), and those a terminal sends its foreground group.
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGTTIN)
FROM_TERMINAL = (signal.SIGINT, signal.SIGTSTP)


class SignalRelay:
    """Takes signals in the main thread for a worker that runs in another thread.

    Signals that come before the worker is there are kept and handed over when it is.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._target: Callable[[str], None] | None = None

    def deliver(self, name: str) -> None:
        with self._lock:
            target = self._target
            if target is None:
                self._pending.append(name)
                return
        target(name)

    def connect(self, target: Callable[[str], None]) -> None:
        """From now on signals go to ``target`` (the launcher's ``signal``), those kept first."""
        with self._lock:
            self._target = target
            pending, self._pending = self._pending, []
        for name in pending:
            target(name)


def run(worker: Callable[[SignalRelay], None]) -> int:
    """Run ``worker`` under the file watcher; the exit status for the process to end with."""
    if os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true":
        _child(worker)
        return 0
    return _parent()


def _child(worker: Callable[[SignalRelay], None]) -> None:
    reloader = autoreload.get_reloader()
    relay = SignalRelay()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        relay.deliver(signal.Signals(signum).name.removeprefix("SIG"))

    for sig in SIGNALS:
        signal.signal(sig, on_signal)

    def main() -> None:
        try:
            worker(relay)
        finally:
            reloader.stop()  # the worker stopped: the watcher's loop ends and the process exits

    autoreload.start_django(reloader, main)


def _parent() -> int:
    args = autoreload.get_child_arguments()
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    while True:
        child = subprocess.Popen(args, env=env, close_fds=False)

        def forward(signum: int, frame: FrameType | None, child: subprocess.Popen[bytes] = child) -> None:
            if signum in FROM_TERMINAL and _terminal_sent_it():
                return
            child.send_signal(signum)

        for sig in SIGNALS:
            signal.signal(sig, forward)
        code = child.wait()
        if code != 3:
            return code


def _terminal_sent_it() -> bool:
    """Whether an INT or TSTP came from the terminal: it reaches its whole foreground process
    group, this process's child included (same group), so forwarding it would be a second one."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False
