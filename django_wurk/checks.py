"""System checks: bad settings are reported by ``manage.py check`` under the setting's name."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Info, Tags, Warning, register

from django_wurk.core.config import ConfigError, redact_url


@register(Tags.compatibility, "wurk")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Both layers' settings (the engine's ``Config`` and the app's own ``Settings``), every
    problem at once: a newcomer fixing one typo per ``check`` run would take many runs."""
    from django_wurk.conf import UnreadableFile, problems
    from django_wurk.core.config import UnknownSetting

    errors: list[CheckMessage] = []
    for exc in problems():
        if exc.setting == "PERIODIC" and not isinstance(exc, (UnknownSetting, UnreadableFile)):
            continue  # check_periodic reports every bad entry, not only the first
        if isinstance(exc, UnreadableFile):
            hint = f"Make {exc.variable} name a readable UTF-8 file, or unset it."
        elif isinstance(exc, UnknownSetting):
            # Not "or WURK_<key>": an environment variable of an unknown name is never read.
            hint = "Correct the key's name or remove it; docs/configuration.md lists every setting."
        else:
            hint = f"Fix WURK[{exc.setting!r}] (or WURK_{exc.setting} in the environment)."
        errors.append(Error(str(exc), hint=hint, id="django_wurk.E001"))
    return errors


@register("wurk")
def check_registry(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django_wurk.core.registry import registry

    return [
        Error(
            f"wire_name {name!r} is registered by more than one job: {', '.join(paths)}",
            hint="Give each job its own wire_name; a worker could not tell them apart.",
            id="django_wurk.E002",
        )
        for name, paths in registry.duplicates().items()
    ]


@register("wurk")
def check_job_modules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W005: a job whose module only a web process imports (a view, a urls module, a form).

    It enqueues fine; a worker, which imports each app's ``jobs`` module at start-up and not
    the views, cannot run it, and every push of it retries as ``UnknownJobError`` until it
    dies. Found here, by the job's name, rather than in the dead set days later.
    """
    from django.apps import apps

    from django_wurk.core.registry import registry

    found: list[CheckMessage] = []
    for name in registry.undiscovered():
        job_class = registry.resolve(name)
        if job_class is None:
            continue
        module = job_class.__module__
        app = apps.get_containing_app_config(module)
        home = f"{app.name}.jobs" if app is not None else "the jobs module of one of your apps"
        found.append(
            Warning(
                f"job {name!r} is defined in {module}, which runwurk does not import when it starts:"
                " a worker cannot run it, and each push of it retries as UnknownJobError until it"
                " dies",
                hint=f"Move it to {home}, or import {module} from there: a worker imports every"
                " installed app's jobs module (and tasks module, with TASKS or Celery's"
                " autodiscover_tasks()) at start-up. If an AppConfig.ready() listed after"
                " django_wurk imports it, silence this with SILENCED_SYSTEM_CHECKS.",
                id="django_wurk.W005",
            )
        )
    return found


@register("wurk", deploy=True)
def check_redis(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Only with ``--deploy`` (``--tag wurk`` alone skips deployment checks): it opens a connection."""
    from redis.exceptions import RedisError

    from django_wurk.conf import build_config
    from django_wurk.core.connection import connect

    try:
        config = build_config()
    except ConfigError:
        return []
    client = connect(config.replace(redis_socket_timeout=1.0))
    try:
        client.ping()
    except RedisError as exc:
        return [
            Warning(f"Redis at {redact_url(config.redis_url)} does not answer: {exc}", id="django_wurk.W001")
        ]
    finally:
        client.connection_pool.disconnect()
    return []


@register("wurk")
def check_periodic(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every bad ``WURK["PERIODIC"]`` entry, each by its index and job (bad cron or tz, a job no
    app registers, unknown keys, wrong types)."""
    from django_wurk.conf import merged_values
    from django_wurk.core.registry import registry
    from django_wurk.periodic import entry_problems

    try:
        # Not stopped by an unknown key or an unreadable file elsewhere: check_settings reports those.
        raw = merged_values(errors=[]).get("PERIODIC", ())
    except ConfigError:
        return []  # settings.WURK is not a dict: check_settings reports it
    return [
        Error(
            f"WURK['PERIODIC']: {problem}",
            hint="Fix WURK['PERIODIC'] (or WURK_PERIODIC in the environment); see docs/periodic.md.",
            id="django_wurk.E003",
        )
        for problem in entry_problems(raw, registry)
    ]


@register("wurk")
def check_encryption(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``encrypt=True`` jobs need a key, and keys need the ``cryptography`` package.

    Found here rather than at the first push, which would fail in a request or, in a worker,
    leave the jobs' arguments unreadable.
    """
    import importlib.util

    from django_wurk.conf import build_config
    from django_wurk.core.registry import registry

    try:
        config = build_config()
    except ConfigError:
        return []  # check_settings reports it
    encrypted = sorted(
        name
        for name in registry.names()
        if (cls := registry.resolve(name)) is not None
        and getattr(cls, "_defaults", {}).get("encrypt") is True
    )
    from django_wurk.core.features.encryption import EncryptionSettings

    keys = config.section(EncryptionSettings).encryption_keys
    errors: list[CheckMessage] = []
    if encrypted and not keys:
        errors.append(
            Error(
                f"WURK['ENCRYPTION_KEYS'] is empty, but these jobs are encrypt=True: {', '.join(encrypted)}",
                hint="Set WURK['ENCRYPTION_KEYS'] (or WURK_ENCRYPTION_KEYS / WURK_ENCRYPTION_KEYS_FILE); "
                "see docs/encryption.md.",
                id="django_wurk.E004",
            )
        )
    unique = [
        name
        for name in encrypted
        if (cls := registry.resolve(name)) is not None and getattr(cls, "_defaults", {}).get("unique_for")
    ]
    if unique:
        errors.append(
            Warning(
                f"these encrypt=True jobs are unique_for too: {', '.join(unique)}; the unique lock is "
                "taken over the encrypted argument, which differs at every push, so no duplicate is found",
                hint="Drop one of the two options; see docs/encryption.md.",
                id="django_wurk.W002",
            )
        )
    if (encrypted or keys) and importlib.util.find_spec("cryptography") is None:
        errors.append(
            Error(
                "WURK['ENCRYPTION_KEYS'] needs the 'cryptography' package, which is not installed",
                hint="pip install 'django-wurk[encryption]'",
                id="django_wurk.E005",
            )
        )
    return errors


@register("wurk")
def check_celery_beat(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``CELERY_BEAT_SCHEDULE``, when a project still has one: the beat entries that cannot
    become periodic jobs (W003), the mapped ones ``WURK["PERIODIC"]`` does not hold (W004: no
    leader fires them), and what an imported entry drops or changes (I002). Beat stops at the
    cutover; without these, an entry ``periodic_entries`` skipped would stop firing silently."""
    from django.conf import settings

    from django_wurk.conf import build_settings

    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if not schedule:
        return []
    hint = (
        "See docs/migrate-from-celery.md (Beat); silence with SILENCED_SYSTEM_CHECKS while Celery beat"
        " still fires it."
    )
    if not isinstance(schedule, dict):
        return [Warning("CELERY_BEAT_SCHEDULE is not a dict", hint=hint, id="django_wurk.W003")]
    try:
        from django_wurk.celery.schedules import periodic_entries
    except ImportError as exc:  # the celery extra (kombu) is not installed
        return [Warning(f"CELERY_BEAT_SCHEDULE cannot be read ({exc})", hint=hint, id="django_wurk.W003")]
    timezone = getattr(settings, "CELERY_TIMEZONE", None)
    try:
        configured = {(e.job, e.cron) for e in build_settings().periodic}
    except ConfigError:
        configured = None  # check_settings and check_periodic report it
    found: list[CheckMessage] = []
    for name, entry in schedule.items():
        beat = periodic_entries({name: entry}, timezone if isinstance(timezone, str) else None)
        for why in beat.skipped.values():
            found.append(
                Warning(f"CELERY_BEAT_SCHEDULE entry {name!r} cannot be a periodic job: {why}", hint=hint,
                        id="django_wurk.W003")
            )  # fmt: skip
        for mapped in beat.entries:
            if configured is not None and (mapped["job"], mapped["cron"]) not in configured:
                found.append(
                    Warning(f"CELERY_BEAT_SCHEDULE entry {name!r} ({mapped['cron']} {mapped['job']}) is not"
                            " in WURK['PERIODIC']: no runwurk leader fires it",
                            hint="WURK['PERIODIC'] = periodic_entries(CELERY_BEAT_SCHEDULE, ...).entries",
                            id="django_wurk.W004")
                )  # fmt: skip
        for note in beat.notes.get(str(name), ()):
            found.append(Info(f"CELERY_BEAT_SCHEDULE entry {name!r}: {note}", id="django_wurk.I002"))
    return found


#: ``CELERY_*`` settings something else reads, or whose value is what happens here anyway.
CELERY_HANDLED = {
    "broker_url": None,  # wurk_drain_celery's old broker
    "broker_transport_options": None,  # the drain's too
    "result_backend": None,  # results are written in Celery's Redis layout into wurk's Redis
    "enable_utc": True,
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ("json", "application/json"),
    "result_accept_content": ("json", "application/json"),
}


def _handled(key: str, value: Any) -> bool:
    if key not in CELERY_HANDLED:
        return False
    expected = CELERY_HANDLED[key]
    if expected is None:
        return True
    if isinstance(expected, tuple):
        return isinstance(value, (list, tuple, set, frozenset)) and all(v in expected for v in value)
    return bool(value == expected)


@register("wurk")
def check_celery_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W006: a ``CELERY_*`` setting the Celery layer does not read (``CELERY_TASK_ANNOTATIONS``,
    ``CELERY_WORKER_CONCURRENCY``...), or a value it cannot honour (a pickle serializer). Left in
    settings after the import swap, it would look configured and do nothing."""
    from django.conf import settings

    names = sorted(n for n in dir(settings) if n.startswith("CELERY_"))
    if not names:
        return []
    try:
        from django_wurk.celery.task import DEFAULTS
    except ImportError:  # the celery extra (kombu) is not installed: nothing reads them at all
        return []
    return [
        Warning(
            f"{name} is not read by django_wurk.celery: it has no effect here",
            hint="docs/migrate-from-celery.md says what each Celery setting and option maps to;"
            " remove it once Celery is gone, or silence django_wurk.W006 until then.",
            id="django_wurk.W006",
        )
        for name in names
        if name[len("CELERY_") :].lower() not in DEFAULTS
        and not _handled(name[len("CELERY_") :].lower(), getattr(settings, name))
    ]


@register("wurk")
def check_observability(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The health port needs prometheus-client and tracing opentelemetry-api: said at start-up,
    not as an ImportError in a worker's first seconds."""
    import importlib.util

    from django_wurk.conf import app_settings

    try:
        app = app_settings()
    except ConfigError:
        return []  # check_settings reports it
    errors: list[CheckMessage] = []
    if app.health_port and importlib.util.find_spec("prometheus_client") is None:
        errors.append(
            Error(
                "WURK['HEALTH_PORT'] needs the 'prometheus-client' package, which is not installed",
                hint="pip install 'django-wurk[prometheus]'",
                id="django_wurk.E006",
            )
        )
    if app.tracing and importlib.util.find_spec("opentelemetry") is None:
        errors.append(
            Error(
                "WURK['TRACING'] needs the 'opentelemetry-api' package, which is not installed",
                hint="pip install 'django-wurk[tracing]'",
                id="django_wurk.E007",
            )
        )
    return errors
