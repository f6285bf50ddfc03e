"""The enqueue verbs are typed with the job's parameters, for mypy and for pyright.

``tests/typing/enqueue_sample.py`` marks each wrong call with ``# error``; both checkers
must report exactly those lines: a missed one is a call the editor would let through, an
extra one a right call it would flag.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "typing" / "enqueue_sample.py"
BIN = Path(sys.executable).parent


def expected_lines() -> set[int]:
    lines = SAMPLE.read_text().splitlines()
    return {i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# error")}


def reported(output: str, pattern: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(pattern, output, re.MULTILINE)}


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: `pip install -e '.[test]'` brings it")
        return found
    return str(path)


def test_the_sample_marks_wrong_calls() -> None:
    assert len(expected_lines()) >= 15


@pytest.mark.slow
def test_mypy_reports_exactly_the_wrong_calls() -> None:
    proc = subprocess.run(
        [tool("mypy"), "--strict", "--no-incremental", "--cache-dir", os.devnull, str(SAMPLE)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert reported(output, r"enqueue_sample\.py:(\d+): error") == expected_lines(), output


@pytest.mark.slow
def test_pyright_reports_exactly_the_wrong_calls() -> None:
    proc = subprocess.run(
        [tool("pyright"), "--pythonpath", sys.executable, str(SAMPLE)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "error" in output or proc.returncode == 0, output
    assert reported(output, r"enqueue_sample\.py:(\d+):\d+ - error") == expected_lines(), output
