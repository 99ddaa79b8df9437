"""The import picture of the project's packages, from the ast import graph of
``tests/test_layering.py`` (every import statement: top level, ``TYPE_CHECKING``, inside
functions).

Run ``python -m tests.import_picture`` from the project root. Per package it prints:

- modules: its ``.py`` files (a package counts by its ``__init__``);
- rooms: its sub-packages (each with everything under it) and the loose modules of its
  root (the root's ``__init__`` is one);
- floors: the length of the longest chain of imports between rooms, once rooms importing
  each other round a loop are merged into one;
- circles: groups of modules importing each other round a loop (Tarjan, as the test);
- upward: for the engine only, imports against ``ENGINE_LAYERS``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tests.test_layering import (
    ALLOWED,
    ENGINE,
    ROOT,
    engine_layer,
    import_cycles,
    import_graph,
    module_names,
    upward_edges,
)


def room_of(module: str) -> str:
    """``module``'s room: its top sub-package, or itself if it is a loose root module."""
    return ".".join(module.split(".")[:2])


def room_floors(graph: dict[str, set[str]]) -> int:
    """The longest chain of imports between rooms (1 when no room imports another)."""
    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        home = room_of(source)
        folders.setdefault(home, set())
        folders[home].update(room_of(t) for t in targets if room_of(t) != home)
    merged = {name: name for name in folders}
    for cycle in import_cycles(folders):
        for name in cycle:
            merged[name] = cycle[0]
    condensed: dict[str, set[str]] = {}
    for source, targets in folders.items():
        condensed.setdefault(merged[source], set()).update(
            merged[t] for t in targets if merged[t] != merged[source]
        )

    @cache
    def height(name: str) -> int:
        return 1 + max((height(t) for t in condensed.get(name, ())), default=0)

    return max((height(name) for name in condensed), default=0)


def picture(package: str) -> dict[str, int]:
    if package == "pyspark_txnlog":
        return {}
    modules = module_names(ROOT, package)
    graph = import_graph(ROOT, package)
    row = {
        "modules": len(modules),
        "rooms": len({room_of(m) for m in modules}),
        "floors": room_floors(graph),
        "circles": len(import_cycles(graph)),
    }
    if package == ENGINE:
        try:
            row["upward"] = len(upward_edges(graph))
            row["layers"] = 1 + max(engine_layer(m) for m in modules)
        except KeyError:
            row["upward"] = -1
    return row


def main() -> None:
    for package in sorted(set(ALLOWED) - {"pyspark_txnlog"}):
        row = picture(package)
        print(f"{package:20} " + "  ".join(f"{key} {value:3}" for key, value in row.items()))
        if package == ENGINE:
            root = sorted(m for m in module_names(ROOT, package) if m.count(".") == 1)
            loose = [m for m in root if not (ROOT / Path(*m.split("."))).is_dir()]
            print(f"{'':20} loose modules at the root: {len(loose)}")


if __name__ == "__main__":
    main()
