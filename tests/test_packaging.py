"""The package as an index shows it: metadata, what the sdist carries, and a README whose
links work away from the repository (an index page renders it with no docs/ beside it)."""

from __future__ import annotations

import os
import re
import tarfile
import tomllib
from email.parser import Parser
from pathlib import Path

import pytest
from setuptools import build_meta

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DOCS_URL = PROJECT["urls"]["Documentation"]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> tarfile.TarFile:
    out = tmp_path_factory.mktemp("dist")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        name = build_meta.build_sdist(str(out))
    finally:
        os.chdir(cwd)
    return tarfile.open(out / name)


@pytest.mark.slow
def test_the_sdist_carries_the_docs_the_changelog_and_the_license(sdist: tarfile.TarFile) -> None:
    names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    docs = {f"docs/{p.relative_to(ROOT / 'docs').as_posix()}" for p in (ROOT / "docs").rglob("*.md")}
    assert docs <= names, sorted(docs - names)
    assert {"CHANGELOG.md", "LICENSE", "README.md", "mkdocs.yml", "django_wurk/py.typed"} <= names
    [info] = [m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO") and m.name.count("/") == 1]
    meta = Parser().parsestr(sdist.extractfile(info).read().decode())  # type: ignore[union-attr]
    urls = dict(value.split(", ", 1) for value in meta.get_all("Project-URL"))
    assert set(urls) >= {"Homepage", "Documentation", "Source", "Changelog", "Issues"}
    assert "Development Status :: 4 - Beta" in meta.get_all("Classifier")
    assert meta["License-Expression"] == "MIT" and meta["Description-Content-Type"] == "text/markdown"


def test_the_classifiers_say_what_the_readme_says_ci_tests() -> None:
    djangos = sorted(
        c.rsplit(" ", 1)[1] for c in PROJECT["classifiers"] if c.startswith("Framework :: Django ::")
    )
    readme = (ROOT / "README.md").read_text()
    tested = re.search(r"tested on ([\d.]+) and ([\d.]+)\)", readme)
    assert tested is not None and djangos == sorted(tested.groups())
    pythons = [
        c.rsplit(" ", 1)[1]
        for c in PROJECT["classifiers"]
        if re.match(r"Programming Language :: Python :: 3\.\d+$", c)
    ]
    assert pythons[0] == PROJECT["requires-python"].removeprefix(">=")


def test_the_readme_links_are_absolute_and_lead_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme) + re.findall(r"<(https?://[^>]+)>", readme)
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert relative == [], "an index page has no docs/ beside the README: link the site instead"
    for link in links:
        if link.startswith(DOCS_URL):
            page, _, anchor = link.removeprefix(DOCS_URL).partition("#")
            if not page:
                continue
            source = ROOT / "docs" / page.replace(".html", ".md")
            assert source.exists(), link
            if anchor:
                headings = re.findall(r"^#+ (.+)$", source.read_text(), re.MULTILINE)
                slugs = {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}
                assert anchor in slugs, link
