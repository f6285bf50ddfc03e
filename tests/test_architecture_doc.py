"""docs/architecture.md's table of feature x hook says what each feature really plugs in.

Each row is built (``Feature.build`` on a fresh engine) and its hooks, events and options
compared with the row; the rows marked DEFAULT are ``core.features.DEFAULT``, in its order;
and every feature the package makes has a row, so a new one cannot be left out.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from django_wurk import Wurk, db, delivery, signals
from django_wurk.celery import job as celery_job
from django_wurk.core.feature import Feature
from django_wurk.core.features import DEFAULT, history, observability, periodic
from django_wurk.core.features.observability import statsd, tracing

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
HOOKS = ("client", "server", "gate", "on_error", "on_retry", "on_death")
COLUMNS = (
    "Client middleware",
    "Server middleware",
    "Push gate",
    "Error handler",
    "Retry handler",
    "Death handler",
)


def every_feature() -> dict[str, Feature]:
    """Every feature the package makes, by name (those needing arguments, with harmless ones)."""
    made: list[Feature] = [
        *DEFAULT,
        delivery.FEATURE,
        signals.FEATURE,
        db.FEATURE,
        celery_job.FEATURE,
        *periodic.features([]),
        history.feature(),
        *observability.features(observability.HealthOptions(port=0)),
        statsd.feature(None),
        tracing.FEATURE,
    ]
    return {feature.name: feature for feature in made}


def table() -> tuple[list[str], list[dict[str, str]]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Feature |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def names(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def test_the_table_has_the_columns_the_plug_has() -> None:
    header, _ = table()
    assert header == ["Feature", "Joins", *COLUMNS, "Events", "Options", "Settings"]


def test_the_default_rows_are_default_in_its_order() -> None:
    _, rows = table()
    assert [row["Feature"].strip("`") for row in rows if row["Joins"] == "DEFAULT"] == [
        f.name for f in DEFAULT
    ]


def test_each_row_is_what_its_feature_plugs_in() -> None:
    _, rows = table()
    features = every_feature()
    assert sorted(row["Feature"].strip("`") for row in rows) == sorted(features)
    engine = Wurk()
    for row in rows:
        feature = features[row["Feature"].strip("`")]
        plug = feature.build(engine)
        documented = {hook for hook, column in zip(HOOKS, COLUMNS, strict=True) if row[column] == "✓"}
        provided = {hook for hook in HOOKS if getattr(plug, hook) is not None}
        assert documented == provided, feature.name
        assert names(row["Events"]) == set(plug.events), feature.name
        assert names(row["Options"]) == {*feature.job_options, *feature.delivery_options}, feature.name
        keys = {f.name.upper() for f in fields(feature.settings)} if feature.settings else set()
        assert names(row["Settings"]) == keys, feature.name


def test_every_feature_the_package_makes_is_in_the_list() -> None:
    """A new ``Feature(...)`` in the package must join ``every_feature`` (and so the table)."""
    package = DOC.parents[1] / "django_wurk"
    made = sum(
        len(re.findall(r"\bFeature\(", path.read_text(encoding="utf-8")))
        for path in package.rglob("*.py")
        if path != package / "core" / "feature.py"
    )
    assert made == len(every_feature())
