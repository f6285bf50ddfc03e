"""The repository stands on its own: a plain clone passes its own tests, as a new user runs them.

Nothing here may depend on files outside the repository (this workspace once kept the recorded
Sidekiq vectors beside it), and the documented ways to run the suite must work as written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import vectors

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
        [sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/test_wire.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tests collected" in proc.stdout
