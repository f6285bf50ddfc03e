"""The settings table in docs/configuration.md must match the code.

The table whose header starts with ``| Setting |`` lists every ``WURK`` key once, as
`` `KEY` `` in its first column: the engine's keys (``Config``) and the Django app's
(``django_wurk.conf.Settings``) alike, since users write them in one dict. Where the Default
column starts with a Python literal in backticks, that value, read as a ``WURK`` setting
would be, must equal the default of the object that owns the key. Defaults given in words
(the host name) are not checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from django_wurk.conf import Settings, app_setting_names, setting_names
from django_wurk.core.config import Config, key_names
from django_wurk.core.features import SETTINGS

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
KEY_CELL = re.compile(r"^`([A-Z][A-Z0-9_]*)`$")
LEADING_CODE = re.compile(r"^`([^`]+)`")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def settings_table() -> tuple[list[str], list[list[str]]]:
    """The settings table's header cells and its rows (separator line excluded)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and _cells(line)[0] == "Setting":
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            return _cells(line), rows
    raise AssertionError(f"{DOC} has no table whose header starts with '| Setting |'")


def documented() -> dict[str, dict[str, str]]:
    """``{KEY: {column header: cell}}`` for every row of the settings table."""
    header, rows = settings_table()
    out: dict[str, dict[str, str]] = {}
    for cells in rows:
        match = KEY_CELL.match(cells[0])
        assert match, f"first cell {cells[0]!r} is not a `KEY` in backticks"
        assert match.group(1) not in out, f"{match.group(1)} is listed twice"
        assert len(cells) == len(header), f"row {cells[0]} has {len(cells)} cells, the header {len(header)}"
        out[match.group(1)] = dict(zip(header, cells, strict=True))
    return out


def literal_default(cell: str) -> tuple[bool, Any]:
    match = LEADING_CODE.match(cell)
    if not match:
        return False, None
    try:
        return True, ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return False, None


def test_table_lists_exactly_the_setting_names() -> None:
    keys = set(documented())
    expected = set(setting_names())
    assert keys == expected, f"missing: {sorted(expected - keys)}, unknown: {sorted(keys - expected)}"


def test_every_setting_has_a_section() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [name for name in setting_names() if f"### `{name}`" not in text]
    assert not missing, f"no '### `KEY`' section for {missing}"


#: Defaults the table gives in words because they depend on the machine.
DESCRIBED_IN_WORDS = {"HOSTNAME"}


def literal_rows() -> list[tuple[str, object]]:
    rows = []
    for name, row in sorted(documented().items()):
        found, value = literal_default(row["Default"])
        if found:
            rows.append((name, value))
    return rows


def test_only_machine_dependent_defaults_are_described_in_words() -> None:
    assert set(documented()) - {name for name, _ in literal_rows()} == DESCRIBED_IN_WORDS


@pytest.mark.parametrize(("name", "value"), literal_rows())
def test_documented_default_matches_config(name: str, value: object) -> None:
    field = name.lower()
    owner: type[Any]
    if name in app_setting_names():
        owner = Settings
        documented_value = getattr(Settings.from_mapping({name: value}), field)
    else:
        # The engine's own key, or a feature's (``Feature.settings``), read through the Config.
        owner = next((kind for kind in SETTINGS if name in key_names(kind)), Config)
        config = Config.from_mapping({name: value}, SETTINGS)
        documented_value = getattr(config if owner is Config else config.section(owner), field)
    default = getattr(owner(), field)
    assert documented_value == default, (
        f"docs say {name} defaults to {value!r}, {owner.__name__}() has {default!r}"
    )


def test_the_table_covers_the_django_apps_settings_too() -> None:
    """The keys moved out of the engine's Config are still documented, with checked defaults."""
    checked = {name for name, _ in literal_rows()}
    assert set(app_setting_names()) <= checked
    assert {"ENQUEUE", "DASHBOARD_STATS_TOKEN"} <= set(app_setting_names())
