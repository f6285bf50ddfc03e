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
