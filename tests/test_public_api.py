"""The public API is what docs/api.md lists, and the docs and the example use nothing else.

docs/api.md's table names each public module in its first column and, in backticks, the
names it exports in the second. Each such module's ``__all__`` must hold exactly those
names, and each must import. Every ``import`` in a Python example of the docs, the READMEs
and the example project must name a public module and only names it exports, so a user who
copies an example never builds on code that may change.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
API_DOC = ROOT / "docs" / "api.md"
ROW = re.compile(r"^\|\s*`(django_wurk[\w.]*)`\s*\|(.*)\|\s*$")
CODE = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def documented() -> dict[str, list[str]]:
    """``{module: [names]}`` from the table in docs/api.md."""
    table: dict[str, list[str]] = {}
    for line in API_DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(1) not in table, f"{match.group(1)} is listed twice"
            table[match.group(1)] = CODE.findall(match.group(2))
    assert "django_wurk" in table and "django_wurk.api" in table, f"no module table in {API_DOC}"
    return table


PUBLIC = documented()


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_all_is_exactly_the_documented_list(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    assert sorted(exported) == sorted(PUBLIC[module_name])
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ repeats a name"
    for name in exported:
        assert hasattr(module, name), f"{module_name}.{name} is documented but does not import"


def python_examples() -> list[tuple[str, str]]:
    """``(where, code)`` for every Python example and every Python file of the example project."""
    found: list[tuple[str, str]] = []
    for doc in sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "example_project" / "README.md"]):
        text = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            language, body = match.groups()
            if language == "pycon":
                body = "\n".join(line[4:] for line in body.splitlines() if line.startswith((">>> ", "... ")))
            elif language != "python":
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", body))
    for path in sorted((ROOT / "example_project").rglob("*.py")):
        found.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return found


def imports(code: str) -> list[tuple[str, list[str]]]:
    """``(module, [names])`` for each import of a django_wurk module (names empty for ``import x``)."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "django_wurk":
                out.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names if a.name.split(".")[0] == "django_wurk")
    return out


EXAMPLES = python_examples()


def test_examples_were_found() -> None:
    assert len(EXAMPLES) > 40  # a fence pattern that stopped matching would pass every check


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_examples_import_only_public_names(where: str, code: str) -> None:
    for module, names in imports(code):
        assert module in PUBLIC, f"{where}: imports {module}, which is not public (docs/api.md)"
        for name in names:
            public = name in PUBLIC[module] or f"{module}.{name}" in PUBLIC
            assert public, f"{where}: imports {name} from {module}, which does not export it"


def test_no_doc_names_the_engine_package_as_something_to_use() -> None:
    paths = [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("example_project/**/*")]
    # docs/architecture.md is the map of the internals, for the people who work on them.
    internal = {API_DOC, ROOT / "docs" / "architecture.md"}
    readable = [p for p in paths if p.is_file() and p not in internal and p.suffix in (".md", ".py", ".html")]
    offenders = [
        str(p.relative_to(ROOT)) for p in readable if "django_wurk.core" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
