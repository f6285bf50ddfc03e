"""``manage.py wurk_drain_celery``: move the messages on a Celery broker into wurk, losing none."""

from __future__ import annotations

import logging
import signal
from argparse import ArgumentParser
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from redis.exceptions import RedisError

from django_wurk.core.config import ConfigError, redact_url


class Command(BaseCommand):
    help = (
        "Move every message on a Celery broker (Redis) into wurk: each becomes a job of the task registered"
        " under its Celery name, or goes to the dead set with the reason. Stops when the queues are empty."
    )
    requires_system_checks = ["wurk"]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--broker", help="the Celery broker URL (default: the CELERY_BROKER_URL setting)")
        parser.add_argument(
            "-q",
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="a Celery queue to drain, repeatable (default: celery)",
        )
        parser.add_argument(
            "--follow", action="store_true", help="keep draining new messages until stopped (Ctrl-C, SIGTERM)"
        )
        parser.add_argument("--limit", type=int, help="stop after this many messages")
        parser.add_argument(
            "--restore-unacked",
            action="store_true",
            help="first give back to the drained queues the messages Celery workers took and never"
            " acknowledged (kombu's unacked hash); only once every Celery worker is stopped",
        )
        parser.add_argument(
            "--lease-seconds",
            type=float,
            default=30.0,
            help="how long the one-drain-per-broker lease lasts unless renewed (a restart after a kill"
            " waits at most this long)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from django_wurk import logging as wurk_logging
        from django_wurk.celery import lookup
        from django_wurk.celery.drain import Drain, DrainError, Tally
        from django_wurk.conf import build_config
        from django_wurk.core.engine import wurk

        broker = options["broker"] or getattr(settings, "CELERY_BROKER_URL", None)
        if not broker:
            raise CommandError("give the Celery broker with --broker redis://... (or set CELERY_BROKER_URL)")
        if not isinstance(broker, str):
            raise CommandError(f"CELERY_BROKER_URL must be a URL (text), got {broker!r}")
        transport_options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
        if not isinstance(transport_options, Mapping):
            raise CommandError(
                f"CELERY_BROKER_TRANSPORT_OPTIONS must be a dict, got {type(transport_options).__name__}"
            )
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        queues = list(dict.fromkeys(options["queues"] or ["celery"]))
        if any(not q for q in queues):
            raise CommandError("--queue: a queue name cannot be empty")
        try:
            wurk.configure(build_config())
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        verbosity = int(options["verbosity"])
        wurk_logging.configure(logging.INFO if verbosity >= 2 else logging.WARNING, "text", None)

        def progress(tally: Tally) -> None:
            if verbosity >= 1:
                self.stdout.write(f"drain: {tally}")

        try:
            drain = Drain(
                broker_url=broker,
                queues=queues,
                wurk=wurk,
                lookup=lookup,
                follow=options["follow"],
                limit=options["limit"],
                lease_seconds=options["lease_seconds"],
                restore_unacked=options["restore_unacked"],
                transport_options=transport_options,
                progress=progress,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: drain.stop())
        self.stdout.write(f"draining Celery queue(s) {', '.join(queues)} from {redact_url(broker)}")
        try:
            tally = drain.run()
        except DrainError as exc:
            raise CommandError(f"{exc} ({drain.tally} before it)") from None
        except RedisError as exc:
            raise CommandError(
                f"wurk's Redis failed ({exc}); the message in hand stays on the broker for the next drain"
                f" ({drain.tally} before it)"
            ) from None
        self.stdout.write(self.style.SUCCESS(f"drained: {tally}"))
