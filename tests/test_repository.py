"""The repository stands on its own: a plain clone passes its own tests, as a new user runs them.

Nothing here may depend on files outside the repository (this workspace once kept the recorded
Sidekiq vectors beside it), and the documented ways to run the suite must work as written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests import vectors
from tests.conftest import tail

pytestmark = tail  # runs once, in CI's pass 1 (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def test_the_recorded_sidekiq_vectors_are_part_of_the_repository() -> None:
    if os.environ.get("WURK_VECTORS_DIR"):
        pytest.skip("WURK_VECTORS_DIR points the suite at another copy of the vectors")
    assert vectors.VECTORS == ROOT / "tests" / "vectors"
    listed = json.loads(vectors.raw("MANIFEST.json"))["files"]
    assert set(vectors.JOB_VECTORS) <= set(listed)
    for name in listed:
        assert (vectors.VECTORS / name).is_file(), name
    assert (vectors.VECTORS / "README.md").is_file()


def test_pytest_run_directly_finds_the_test_settings() -> None:
    """``pytest`` (the script) puts no directory on ``sys.path``, unlike ``python -m pytest``;
    ``-P`` makes this interpreter behave the same way."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_wire.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tests collected" in proc.stdout


def stub(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


def test_ci_fails_when_no_redis_answers_for_its_real_redis_pass(tmp_path: Path) -> None:
    """Passes 3 and 4 fail when their server or interpreter is missing; pass 2 (a real Redis on
    6379) must too, or CI goes green without ever having run against Redis. ``make`` and the
    system tools are stand-ins here: only the script's own decisions are under test."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "make-calls"
    stub(bin_dir, "make", f'echo "$WURK_TEST_REDIS_URL|$DATABASE_URL|$*" >> "{calls}"')
    stub(bin_dir, "dpkg-query", "echo 'install ok installed'")
    stub(bin_dir, "apt-get", "exit 1")
    stub(bin_dir, "redis-cli", "exit 1")  # nothing answers PING
    stub(bin_dir, "pg_isready", "exit 0")
    proc = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        env={
            # The environment CI itself runs this suite with (pass 2's Redis, pass 3's database)
            # is not the one .ci/run starts from.
            **{k: v for k, v in os.environ.items() if k not in ("WURK_TEST_REDIS_URL", "DATABASE_URL")},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "test pass 2 failed: no Redis answers PING on 127.0.0.1:6379" in proc.stdout
    # The services are checked before anything runs: nothing ran.
    assert not calls.exists() or calls.read_text().splitlines() == []


def run_ci(tmp_path: Path, make: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``.ci/run`` with ``make`` (and the system tools) as stand-ins: only the script's own
    decisions are under test. The make calls, as ``REDIS_URL|DATABASE_URL|SCOPE|arguments``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "make-calls"
    stub(
        bin_dir, "make", f'echo "$WURK_TEST_REDIS_URL|$DATABASE_URL|$WURK_TEST_SCOPE|$*" >> "{calls}"; {make}'
    )
    stub(bin_dir, "dpkg-query", "echo 'install ok installed'")
    stub(bin_dir, "redis-cli", "echo PONG")
    stub(bin_dir, "pg_isready", "exit 0")
    stub(bin_dir, "python3.14", f'echo "{bin_dir}/python3.14"')  # pass 4's interpreter is found
    proc = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        env={
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("WURK_TEST_REDIS_URL", "DATABASE_URL", "WURK_TEST_SCOPE")
                and not k.startswith("CI_")
            },
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    made = calls.read_text().splitlines() if calls.exists() else []
    venv6 = env.get("CI_VENV6", ".venv-django6")
    return proc, [line.replace(str(bin_dir), "BIN").replace(venv6, "VENV6") for line in made]


PG = "postgres://postgres@127.0.0.1:5432/wurk"
STAGES_0_AND_1 = [
    "|||venv VENV=VENV6 PYTHON=BIN/python3.14",
    "|||venv",
    "|||lint",
    "|||test PYTEST_WORKERS=0 PYTEST_ARGS=-m soak",
    '|||test PYTEST_ARGS=-m "not soak"',
    f'|{PG}|database|test PYTEST_WORKERS=2 PYTEST_ARGS=-m "not soak"',
]


def test_ci_runs_passes_beside_each_other_and_fails_when_a_pass_beside_fails(tmp_path: Path) -> None:
    """Passes run beside each other to stay under 12 minutes; each must still run, with its own
    server, and a failure in a pass run beside another must fail CI, not vanish in a log."""
    # The PostgreSQL pass (run beside pass 1, after the lint) fails; everything else passes.
    proc, made = run_ci(tmp_path, 'if [ -n "$DATABASE_URL" ]; then echo "pg pass output"; exit 3; fi')
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "pg pass output" in proc.stdout
    assert "failed (exit 3)" in proc.stdout
    assert sorted(made) == sorted(STAGES_0_AND_1)


def test_ci_runs_each_scope_in_its_pass_and_prints_every_pass_time(tmp_path: Path) -> None:
    """Pass 1 runs everything; pass 3 the tests of transaction behaviour, on PostgreSQL; pass 2
    the tests that talk to Redis or touch Django, once each, on a real Redis and Django 6
    (tests/conftest.py's scopes)."""
    venv6 = tmp_path / "venv6"
    (venv6 / "bin").mkdir(parents=True)
    stub(venv6 / "bin", "python", "echo Django 6.0")  # the stand-in for pass 2's interpreter
    proc, made = run_ci(tmp_path, "true", CI_VENV6=str(venv6))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(made) == sorted(
        [
            *STAGES_0_AND_1,
            "redis://127.0.0.1:6379/15||redis,django|test VENV=VENV6 PYTHON=BIN/python3.14 PYTEST_WORKERS=4 "
            'PYTEST_ARGS=-m "not soak"',
        ]
    )
    times = proc.stdout[proc.stdout.index("=== times ===") :]
    for name in ("venv", "lint", "pass 1 (everything, Valkey)", "pass 2 (Redis 7, Django 6)",
                 "pass 3 (PostgreSQL)", "the soak", "the whole run"):  # fmt: skip
        assert f" s  {name}" in times, times


def test_hiredis_comes_with_a_plain_install_and_the_old_extra_still_resolves() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    redis = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "redis"]
    assert [(r.extras, r.marker) for r in redis] == [({"hiredis"}, None)]
    assert project["optional-dependencies"]["hiredis"] == []


def pip_installs(target: str, venv: Path) -> list[str]:
    """The ``pip install`` lines ``make <target>`` would run into a virtualenv not yet made."""
    proc = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if " -m pip install " in line]


def test_make_run_installs_only_what_the_demo_needs(tmp_path: Path) -> None:
    """The demo needs the embedded Valkey and django.tasks, not mypy, ruff, playwright or psycopg."""
    venv = tmp_path / "venv"
    assert [line.rsplit(" ", 1)[-1] for line in pip_installs("run", venv)] == ["'.[embedded,tasks]'"]
    for target in ("test", "lint"):
        assert [line.rsplit(" ", 1)[-1] for line in pip_installs(target, venv)] == ["'.[test,embedded]'"]


def test_the_database_scope_keeps_the_transaction_tests_and_drops_the_engine_only_ones() -> None:
    """CI's PostgreSQL pass runs ``WURK_TEST_SCOPE=database``: it must still hold every test of
    transaction behaviour (they are the reason for the pass), and only tests that reach the DB."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_transaction.py", "tests/test_wire.py",
         "tests/test_outbox.py", "tests/dashboard/test_pages.py", "tests/dashboard/test_actions.py"],
        cwd=ROOT,
        env={**os.environ, "WURK_TEST_SCOPE": "database"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    files = {line.split("::")[0] for line in collected}
    # The dashboard's pages reach the database only for the admin's session (pass 1 has them);
    # its actions write the audit row in a savepoint, transaction behaviour.
    assert files == {"tests/test_transaction.py", "tests/test_outbox.py", "tests/dashboard/test_actions.py"}
    every = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_transaction.py", "tests/test_outbox.py",
         "tests/dashboard/test_actions.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert len(collected) == len([line for line in every.stdout.splitlines() if "::" in line])


def test_scopes_joined_by_a_comma_run_their_union_once_and_an_unknown_one_is_refused() -> None:
    """CI's pass on a real Redis and Django 6 runs ``redis,django``: the engine's tests and the
    dashboard's, each once."""
    files = ["tests/test_api_queues.py", "tests/dashboard/test_pages.py", "tests/test_wire.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
        cwd=ROOT, env={**os.environ, "WURK_TEST_SCOPE": "redis,django"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert {line.split("::")[0] for line in collected} == {
        "tests/test_api_queues.py",
        "tests/dashboard/test_pages.py",
    }
    assert len(collected) == len(set(collected))
    wrong = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_wire.py"],
        cwd=ROOT, env={**os.environ, "WURK_TEST_SCOPE": "redis,djnago"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert wrong.returncode != 0 and "expected one of database, django, redis" in wrong.stdout + wrong.stderr
