"""``manage.py runwurk``: run a worker process, with Sidekiq's command-line flags."""

from __future__ import annotations

import logging
import threading
from argparse import ArgumentParser
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError

from django_wurk.core.config import DEFAULT_SHARD, ConfigError, parse_capsules, parse_queue, redact_url
from django_wurk.core.worker.service import CANNOT_START

if TYPE_CHECKING:
    from django_wurk.management.reload import SignalRelay


class Command(BaseCommand):
    help = "Run a django-wurk worker: fetch jobs from Redis and run them."
    requires_system_checks = ["wurk"]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("-c", "--concurrency", type=int, help="job threads per process (default 5)")
        parser.add_argument(
            "-P", "--processes", help="worker processes to fork, or 'auto' for one per CPU (default 1)"
        )
        parser.add_argument("--max-memory-mb", type=float, help="recycle a worker process past this RSS")
        parser.add_argument(
            "-q",
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME[,WEIGHT]",
            help="queue to work, repeatable; strict order without weights, weighted random with them",
        )
        parser.add_argument(
            "--capsule",
            action="append",
            dest="capsules",
            metavar="NAME:CONCURRENCY:QUEUE[,WEIGHT][;QUEUE[,WEIGHT]...]",
            help="a pool of job threads with its own queues, repeatable (replaces WURK['CAPSULES'])",
        )
        parser.add_argument(
            "-t", "--timeout", type=float, help="seconds to let running jobs finish at shutdown"
        )
        parser.add_argument(
            "--shard", help="the shard (WURK['SHARDS']) this process works (default: 'default')"
        )
        parser.add_argument("-g", "--tag", help="a tag shown next to this process in the dashboards")
        parser.add_argument(
            "--verbose", action="store_true", help="debug logging (the same as Django's -v 2)"
        )
        parser.add_argument("--logfile", help="write logs to this file instead of stderr")
        parser.add_argument("--log-format", choices=["text", "json"], default="text")
        parser.add_argument(
            "--health-port",
            type=int,
            help="serve /metrics, /live and /ready on this port (WURK['HEALTH_PORT']; 0 = off)",
        )
        parser.add_argument(
            "--health-bind",
            metavar="ADDRESS",
            help="the address the health port listens on (WURK['HEALTH_BIND']; default 0.0.0.0, every"
            " IPv4 interface; 127.0.0.1 for this host only, :: for IPv6)",
        )
        parser.add_argument(
            "--autoreload", action="store_true", help="restart when code changes (development)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from django_wurk import logging as wurk_logging
        from django_wurk.conf import app_settings, build_config
        from django_wurk.core.engine import wurk
        from django_wurk.periodic import install_from_settings, install_history
        from django_wurk.schedules import REFRESH as SCHEDULES_REFRESH
        from django_wurk.schedules import ScheduleSource

        queues = None
        if options["queues"]:
            try:
                queues = [parse_queue("QUEUES", q) for q in options["queues"]]
            except ConfigError as exc:
                raise CommandError(f"--queue: {exc}") from None
        concurrency = options["concurrency"]
        capsules = None
        if options["capsules"]:
            if queues or concurrency:
                raise CommandError("--capsule: each capsule has its own queues and threads; drop -q and -c")
            try:
                capsules = parse_capsules("CAPSULES", options["capsules"])
            except ConfigError as exc:
                raise CommandError(f"--capsule: {exc}") from None
            # The flags win over the settings' QUEUES and CONCURRENCY, as -q and -c do.
            queues = [q for capsule in capsules for q in capsule.queues]
            concurrency = sum(capsule.concurrency for capsule in capsules)
        overrides = {
            "CONCURRENCY": concurrency,
            "QUEUES": queues,
            "TIMEOUT": options["timeout"],
            "TAG": options["tag"],
            "PROCESSES": options["processes"],
            "MAX_MEMORY_MB": options["max_memory_mb"],
            "CAPSULES": capsules,
            "SHARD": options["shard"],
        }
        try:
            config = build_config(overrides)
            app = app_settings()  # the app's own settings too: a bad one stops the start, by name
            # Every process campaigns to be the leader that fires WURK["PERIODIC"] and the
            # admin's schedules: one leader per shard, but only the default shard's fires them
            # (once fleet-wide).
            default_shard = config.shard == DEFAULT_SHARD
            periodic = app.periodic if default_shard else ()
            schedules = ScheduleSource(wurk.registry) if default_shard else None
            install_from_settings(wurk, periodic, app.leader, app.leader_ttl, schedules, SCHEDULES_REFRESH)
            # The leader (of those) records the historical metrics (docs/metrics.md).
            install_history(wurk, app.history_interval, app.history_retention, app.leader)
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        verbosity = 2 if options["verbose"] else int(options["verbosity"])
        level = logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 else logging.WARNING
        wurk_logging.configure(level, options["log_format"], options["logfile"])
        wurk.configure(config)
        where = redact_url(config.shard_url(config.shard))
        if config.shards:
            where += f" (shard {config.shard!r})"
        logging.getLogger("django_wurk").info("using Redis at %s", where)
        swarm = not options["autoreload"] and (config.processes > 1 or bool(config.max_memory_mb))
        if options["health_bind"] is not None:
            try:
                app = app.replace(health_bind=options["health_bind"])
            except ConfigError as exc:
                raise CommandError(f"--health-bind: {exc}") from None
        self._observe(app, options["health_port"], swarm)

        if options["autoreload"]:
            from django_wurk.management import reload

            code = reload.run(lambda signals: self._run(signals=signals))
            if code:
                raise SystemExit(code)
        elif config.processes > 1 or config.max_memory_mb:
            self._run_swarm()
        else:
            self._run()

    def _observe(self, app: Any, flag: int | None, swarm: bool) -> None:
        """StatsD when set; counting and the health port when a port is set (under -P, by the supervisor)."""
        from django_wurk.core.engine import wurk
        from django_wurk.core.features import observability

        if app.statsd_host:
            from django_wurk.core.features.observability import statsd

            try:
                client = statsd.Statsd(app.statsd_host, app.statsd_port, app.statsd_prefix)
            except OSError as exc:
                raise CommandError(
                    f"WURK['STATSD_HOST']: cannot resolve {app.statsd_host!r}: {exc}"
                ) from None
            wurk.use(statsd.feature(client))
        port = app.health_port if flag is None else flag
        self._health = None
        self._metrics_dir = None
        if not port:
            return
        if not 0 < port <= 65535:
            raise CommandError(f"--health-port: must be a TCP port (1-65535), got {port}")
        health = observability.HealthOptions(port, app.health_bind, app.ready_window)
        if swarm:
            from django_wurk.core.features.observability.supervisor import prepare_multiprocess_dir

            self._metrics_dir = prepare_multiprocess_dir()  # before prometheus-client is imported
        try:
            wurk.use(*observability.features(None if swarm else health))
        except ImportError as exc:
            raise CommandError(
                f"HEALTH_PORT needs prometheus-client (pip install 'django-wurk[prometheus]'): {exc}"
            ) from None
        self._health = health

    def _run_swarm(self) -> None:
        from django.db import connections

        from django_wurk.core.engine import wurk
        from django_wurk.core.worker.swarm import Swarm

        config = wurk.config

        server = None
        # Held by the health port's probes while they read Redis, and here while the pool's
        # connections are dropped: a probe must not lose its connection mid-read.
        redis_in_use = threading.Lock()

        def before_fork() -> None:
            # Django is set up once, here; nothing connected may cross the fork.
            connections.close_all()
            with redis_in_use:
                wurk.reset()

        def after_fork() -> None:
            wurk.reset()
            if server is not None:  # the port is the supervisor's: a child must not hold it open
                server.server.socket.close()

        def run_child(index: int) -> int:
            try:
                self._run(owns_process=False)  # the swarm ends a child with os._exit
            except CommandError as exc:  # e.g. a Redis that refuses the worker: said once, here
                logging.getLogger("django_wurk.swarm").error("%s", exc)
                return CANNOT_START  # the supervisor stops rather than start another
            return 0

        swarm = Swarm(
            config.processes,
            run_child,
            before_fork=before_fork,
            after_fork=after_fork,
            max_memory_mb=config.max_memory_mb,
            shutdown_timeout=config.timeout,
        )
        if self._health is not None and self._metrics_dir is not None:
            from django_wurk.core.features.observability import supervisor

            swarm.on_child_exit = supervisor.child_exited(self._metrics_dir)
            try:
                server = supervisor.serve(
                    wurk, self._health, self._metrics_dir, lambda: list(dict(swarm.children)), redis_in_use
                )
            except OSError as exc:  # the health port is taken
                raise CommandError(str(exc)) from None
        try:
            status = swarm.run()
        finally:
            if server is not None:
                server.stop()
        if status:
            raise CommandError("a worker process could not start (its error is above)", returncode=status)

    def _run(self, owns_process: bool = True, signals: SignalRelay | None = None) -> None:
        import atexit
        import threading

        from django_wurk import db
        from django_wurk.conf import app_settings
        from django_wurk.core.engine import wurk
        from django_wurk.core.worker import Launcher

        # Only worker threads need it; tests and inline runs keep Django's own handling
        # (its test tools detach close_old_connections for the same reason).
        wurk.use(db.FEATURE)
        launcher = Launcher(wurk)
        relay = None
        app = app_settings()
        if app.enqueue == "outbox":
            # Every worker relays outbox rows left behind by a crash or a Redis outage.
            from django.conf import settings

            from django_wurk.outbox import Relay

            relay = Relay(wurk, [app.database, *(a for a in settings.DATABASES if a != app.database)])
            relay.start()
        try:
            if threading.current_thread() is threading.main_thread():
                launcher.run()
            else:
                # Under --autoreload Django runs us in a side thread and exits the process when
                # code changes; stop cleanly at exit so running jobs are pushed back, not dropped.
                # OS signals reach the main thread, which hands them over (``reload``).
                atexit.register(launcher.stop)
                if signals is not None:
                    signals.connect(launcher.signal)
                launcher.run(handle_os_signals=False)
                return
        except ConfigError as exc:  # a Redis that refuses this worker for good, found at start
            raise CommandError(str(exc)) from None
        except OSError as exc:  # a feature could not start (the health port is taken): say which setting
            raise CommandError(str(exc)) from None
        finally:
            if relay is not None:
                relay.stop()
        if owns_process:
            # A thread a job left running must not keep this process alive after "stopped".
            launcher.guard_exit()
