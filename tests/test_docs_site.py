"""The documentation site (``make docs``): MkDocs builds it with --strict, so a link or an
anchor between pages that leads nowhere, or a page missing from the navigation, fails here
(and in CI); the API reference is generated from the public modules' docstrings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
def test_every_page_is_built_with_no_broken_link(site: Path) -> None:
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert pages <= {p.stem for p in site.glob("*.html")}
    assert (site / "search" / "search_index.json").exists()


@pytest.mark.slow
def test_the_api_reference_is_generated_from_the_docstrings(site: Path) -> None:
    page = (site / "reference" / "django_wurk.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    # The typed enqueue, with its docstring, as the code has it.
    assert "perform_async" in text and "Generic in the job's parameters" in text
    for name in ("Job", "Setter", "Batch", "Config"):
        assert f'id="django_wurk.{name}"' in page, name
    api = (site / "reference" / "api.html").read_text()
    assert 'id="django_wurk.api.RetrySet"' in api and 'id="django_wurk.api.LoopSet"' in api
    models = (site / "reference" / "django.html").read_text()
    assert 'id="django_wurk.models.Schedule"' in models


def test_mkdocs_lists_every_page_of_docs() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        assert page.relative_to(ROOT / "docs").as_posix() in config, f"{page.name} is not in mkdocs.yml's nav"
