"""The worked migration of docs/migrate-from-celery.md: a small Celery project, moved.

``sample_project/celery_version`` is a Celery project as Celery's docs lay one out (``proj/celery.py``,
``@shared_task`` with bind, retry and autoretry, ``CELERY_BEAT_SCHEDULE`` with crontab and
interval entries); ``sample_project/wurk_version`` is the same project after the migration.
These tests hold the docs to it: the diff is the handful of lines the docs walk through,
``manage.py check`` accepts the imported beat entries and names the one it could not import,
and the migrated tasks run on a real ``runwurk`` worker of that project.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import test_runwurk
from tests.conftest import tail
from tests.test_runwurk import worker_env

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

stop_later = test_runwurk.stop_later  # the fixture that kills subprocesses a test left running

SAMPLE = Path(__file__).resolve().parent / "sample_project"
BEFORE, AFTER = SAMPLE / "celery_version", SAMPLE / "wurk_version"
DOC = Path(__file__).resolve().parents[2] / "docs" / "migrate-from-celery.md"


def changed_lines() -> dict[str, list[str]]:
    """``{file: [the diff's - and + lines]}`` for every file the migration changed."""
    files = sorted(
        {p.relative_to(BEFORE) for p in BEFORE.rglob("*.py")}
        | {p.relative_to(AFTER) for p in AFTER.rglob("*.py")}
    )
    out = {}
    for name in files:
        before = (BEFORE / name).read_text().splitlines() if (BEFORE / name).exists() else []
        after = (AFTER / name).read_text().splitlines() if (AFTER / name).exists() else []
        lines = [
            line
            for line in difflib.unified_diff(before, after, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        if lines:
            out[str(name)] = lines
    return out


def test_the_migration_changes_imports_and_one_settings_line() -> None:
    assert changed_lines() == {
        "proj/celery.py": ["-from celery import Celery", "+from django_wurk.celery import Celery"],
        "proj/settings.py": [
            "-from celery.schedules import crontab",
            "+from django_wurk.celery.schedules import crontab, periodic_entries",
            '-INSTALLED_APPS = ["shop"]',
            '+INSTALLED_APPS = ["django_wurk", "shop"]',
            "+",
            "+# Beat's schedule, fired by the runwurk leader: no beat process any more.",
            '+WURK = {"PERIODIC": periodic_entries(CELERY_BEAT_SCHEDULE, timezone=CELERY_TIMEZONE).entries}',
        ],
        "shop/tasks.py": ["-from celery import shared_task", "+from django_wurk.celery import shared_task"],
    }


def test_the_docs_show_the_whole_diff() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```diff\n(.*?)```", text, re.S))
    for name, lines in changed_lines().items():
        assert name in text, f"the docs do not name {name}"
        for line in lines:
            if line.strip("+-").strip():
                assert line in blocks.splitlines(), f"the docs' diff lacks {line!r} ({name})"


def sample_env(redis_url: str) -> dict[str, str]:
    env = worker_env(redis_url)
    env["DJANGO_SETTINGS_MODULE"] = "proj.settings"
    env.pop("PYTHONPATH", None)  # the project's own directory, as `python manage.py` has it
    return env


def manage(redis_url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=AFTER,
        env=sample_env(redis_url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_check_accepts_the_imported_beat_entries_and_names_the_one_left_out(redis_url: str) -> None:
    checked = manage(redis_url, "check")
    assert checked.returncode == 0, checked.stderr
    output = checked.stdout + checked.stderr
    assert "django_wurk.E" not in output  # WURK['PERIODIC'] is valid: crons, time zone, registered tasks
    [skipped] = [line for line in output.splitlines() if "(django_wurk.W003)" in line]
    assert "'refresh-exchange-rates'" in skipped and "cron has no seconds" in skipped
    assert "django_wurk.W004" not in output  # every entry that could be imported was

    shown = manage(
        redis_url,
        "shell",
        "-c",
        "import json; from django.conf import settings; print(json.dumps(settings.WURK))",
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.splitlines()[-1])["PERIODIC"] == [
        {"cron": "0 2 * * *", "job": "shop.tasks.sales_report", "args": [], "tz": "Europe/Berlin"},
        {
            "cron": "0 8 * * 1",
            "job": "shop.tasks.sales_report",
            "args": ["weekly"],
            "queue": "reports",
            "tz": "Europe/Berlin",
        },
        {"cron": "*/15 * * * *", "job": "shop.tasks.expire_carts", "args": [7], "tz": "Europe/Berlin"},
    ]


CALLS = """
import json
from shop import tasks
from django_wurk.celery import AsyncResult

stock = tasks.sync_stock.delay("SKU-1")
receipt = tasks.send_receipt.delay(7)
later = tasks.total.apply_async(([1, 2, 3],), countdown=1)
report = tasks.sales_report.delay("weekly")
try:
    tasks.total.delay(["a", 1]).get(timeout=30)
    error = None
except TypeError as exc:
    error = str(exc)
print(json.dumps({
    "stock": stock.get(timeout=30),
    "receipt": receipt.get(timeout=30),
    "later": later.get(timeout=30),
    "report": report.get(timeout=30),
    "error": error,
    "state": AsyncResult(receipt.id).state,
}))
"""


def test_the_migrated_project_runs_on_real_workers(
    r: Any, redis_url: str, stop_later: list[subprocess.Popen[str]]
) -> None:
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "runwurk", "-c", "4", "-q", "default", "-q", "mail", "-q", "reports"],
        cwd=AFTER,
        env=sample_env(redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop_later.append(worker)

    ran = manage(redis_url, "shell", "-c", CALLS, timeout=90)

    assert ran.returncode == 0, ran.stderr
    results = json.loads(ran.stdout.splitlines()[-1])
    assert results["stock"] == {"sku": "SKU-1", "level": 42}  # after one autoretry (backoff 1 s)
    assert results["receipt"] == "receipt for order 7 sent after 1 retries"  # self.retry(countdown=1)
    assert results["later"] == 6 and results["report"] == "weekly report"
    assert results["error"] is not None and "str" in results["error"]  # get() re-raises the task's error
    assert results["state"] == "SUCCESS"
    assert int(r.get("stat:failed") or 0) == 3  # the two retries and the failure, as Sidekiq counts them
