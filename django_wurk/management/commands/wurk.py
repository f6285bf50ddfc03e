"""``manage.py wurk SUBCOMMAND``: operate the queues, sets, processes and loops from a shell.

The subcommands are ``django_wurk.cli``'s functions (which say what each does and the exit
statuses); this file only declares their arguments and prints what they return.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser
from redis.exceptions import RedisError

from django_wurk import cli


class Command(BaseCommand):
    help = (
        "Operate django-wurk: stats, queues, processes, the retry/dead/scheduled sets, retry, kill, "
        "delete, clear, pause, quiet, stop, enqueue, batches and periodic loops. Every subcommand "
        "takes --json."
    )
    # An operations tool reads Redis: it works while migrations are pending, and needs no
    # database answering for the system checks (Django 6.1's ask it about JSONField).
    requires_migrations_checks = False
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        subs = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

        def sub(name: str, run: Callable[..., cli.Outcome], help_text: str) -> CommandParser:
            p: CommandParser = subs.add_parser(name, help=help_text, description=help_text)
            p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
            p.set_defaults(run=run)
            return p

        sub("stats", cli.stats, "totals: processed, failed, enqueued, the sets, processes")
        sub("queues", cli.queues, "every queue with its size, latency and whether it is paused")
        sub("processes", cli.processes, "the worker processes and what they run")
        for kind, help_text in (
            ("dead", "list the dead set, newest first"),
            ("scheduled", "list the scheduled set, soonest first"),
        ):
            sub(kind, cli.listing(kind), help_text).add_argument(
                "--limit", type=_positive, default=cli.DEFAULT_LIMIT, help="how many entries (default 25)"
            )
        p = sub("retry", cli.retry, "list the retry set; with JID retry that job now; --all retries all")
        p.add_argument("jid", nargs="?", help="a job in the retry set (else the dead set) to retry now")
        p.add_argument("--all", action="store_true", help="retry every job in the set")
        p.add_argument("--dead", action="store_true", help="the dead set rather than the retry set")
        p.add_argument(
            "--limit", type=_positive, default=cli.DEFAULT_LIMIT, help="entries to list (default 25)"
        )
        sub("kill", cli.kill, "move a job of the retry or scheduled set to the dead set").add_argument("jid")
        p = sub("delete", cli.delete, "delete a job from the retry, scheduled or dead set (or --queue)")
        p.add_argument("jid")
        p.add_argument("--queue", help="delete it from this queue instead")
        p = sub("clear", cli.clear, "delete every job of a queue (asks first)")
        p.add_argument("queue")
        p.add_argument("--yes", action="store_true", help="do not ask")
        sub("pause", cli.pause, "stop workers taking jobs from a queue").add_argument("queue")
        sub("unpause", cli.unpause, "let workers take jobs from a queue again").add_argument("queue")
        for verb, help_text in (
            ("quiet", "tell processes to take no new jobs"),
            ("stop", "tell processes to finish and exit"),
        ):
            p = sub(verb, cli.signal(verb), help_text)
            target = p.add_mutually_exclusive_group(required=True)
            target.add_argument("identity", nargs="?", help="a process identity (see `wurk processes`)")
            target.add_argument("--all", action="store_true", help="every process")
        p = sub("enqueue", cli.enqueue, "push a job by its wire name or dotted path")
        p.add_argument("job")
        p.add_argument("args_json", nargs="?", metavar="ARGS_JSON", help="positional arguments, a JSON list")
        p.add_argument("--kwargs", metavar="JSON", help="keyword arguments, a JSON object")
        p.add_argument("--queue", help="another queue than the job's own")
        p.add_argument("--in", type=float, metavar="SECONDS", help="schedule it this many seconds from now")
        sub("batch", cli.batch, "a batch's progress").add_argument("bid")
        p = sub("periodic", cli.periodic, "list the periodic loops; `periodic run NAME` enqueues one now")
        p.add_argument("action", nargs="?", choices=["run"])
        p.add_argument("name", nargs="?", help="the loop: its lid, its schedule's name, or its job")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "periodic" and options.get("action") == "run" and not options.get("name"):
            raise CommandError("periodic run needs the loop: a lid, a schedule's name or a job", returncode=2)
        interactive = sys.stdin.isatty() and self.stdout.isatty() and not options["json"]
        terminal = cli.Terminal(out=sys.stderr, interactive=interactive)
        try:
            outcome = options["run"](options, terminal)
        except cli.Failure as exc:
            self._fail(str(exc), exc.status, options["json"])
        except RedisError as exc:
            self._fail(f"Redis does not answer: {exc}", cli.UNAVAILABLE, options["json"])
        if options["json"]:
            self.stdout.write(json.dumps(outcome.data, default=str))
        else:
            for line in outcome.lines:
                self.stdout.write(line)

    def _fail(self, message: str, status: int, as_json: bool) -> NoReturn:
        if as_json:
            self.stdout.write(json.dumps({"error": message, "status": status}))
        raise CommandError(message, returncode=status)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value
