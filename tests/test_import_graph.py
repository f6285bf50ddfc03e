"""No import cycle in the Django glue, lazy (function-level) imports included.

A cycle hidden behind an import inside a function still ties two modules together: neither
can be read, tested or moved without the other. The engine's own graph is left to the
import-linter contracts in pyproject.toml.
"""

from __future__ import annotations

import grimp


def test_no_glue_module_is_part_of_an_import_cycle() -> None:
    graph = grimp.build_graph("django_wurk")
    glue = sorted(m for m in graph.modules if not m.startswith("django_wurk.core"))
    cycles = []
    for importer in glue:
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                cycles.append(" -> ".join([importer, *back]))
    assert cycles == []


def test_the_processor_names_nothing_a_feature_exports() -> None:
    """Item 5 of issue 22: timeouts and iterable jobs reach the processor only through the
    engine's words (``core/control.py``), never by a name of their own.

    The import-linter contract forbids the import; this catches the knowledge without it
    (a class the processor defines for a feature, as ``Interrupted`` once was)."""
    import ast
    import importlib
    import pkgutil
    from pathlib import Path

    import django_wurk.core.features as features
    from django_wurk.core.worker import processor

    exported: dict[str, str] = {}
    for info in pkgutil.iter_modules(features.__path__):
        module = importlib.import_module(f"{features.__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            # What the feature defines; the engine's own words it passes on (``stopping``) are shared.
            if getattr(getattr(module, name), "__module__", module.__name__).startswith(features.__name__):
                exported.setdefault(name, info.name)
    exported.pop("FEATURE", None)
    tree = ast.parse(Path(processor.__file__).read_text())
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {node.name for node in ast.walk(tree) if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    assert "Interrupted" in exported and "TimedOut" in exported  # the test looks where it should
    assert {name: exported[name] for name in used & exported.keys()} == {}
