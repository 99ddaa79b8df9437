"""DESIGN §1: imports only point down the package table; the engine never imports pyspark or
confluent_kafka, so the CLI, unit tests and benchmarks run without a JVM."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {
    "txn_log",
    "offsets",
    "commit_protocol",
    "datasource_options",
    "txn_source",
    "txn_sink",
    "pyspark_txnlog",
    "txn_wire",
}
ALLOWED = {
    "txn_log": {"txn_log", "crc32c", "pyarrow", "numpy"},
    "offsets": {"offsets", "txn_log"},
    "commit_protocol": {"commit_protocol", "txn_log", "offsets", "confluent_kafka"},
    # what the source and the sink share about their options, below both (issue 13 item 5)
    "datasource_options": {"datasource_options", "txn_log"},
    "txn_source": {
        "txn_source",
        "txn_log",
        "offsets",
        "commit_protocol",
        "datasource_options",
        "pyspark",
        "pyarrow",
        "numpy",
        "confluent_kafka",  # Kafka mode (issue 16): kafka_view, kafka_partition
    },
    "txn_sink": {
        "txn_sink",
        "txn_log",
        "offsets",
        "commit_protocol",
        "datasource_options",
        "pyspark",
        "pyarrow",
        "numpy",
    },
    "pyspark_txnlog": {"txn_source", "txn_sink", "pyspark"},
    # the Kafka wire protocol over a log directory (issue 15): the engine and kio, nothing Spark
    "txn_wire": {"txn_wire", "txn_log", "kio"},
}
THIRD_PARTY = {"crc32c", "pyarrow", "numpy", "pyspark", "confluent_kafka", "kio"}
LAZY_EDGES = {
    "txn_log/cli/serve.py": {"txn_wire"},
    "txn_log/cli/users.py": {"txn_wire"},
    "txn_log/cli/acls.py": {"txn_wire"},
}
"""The only imports allowed against the table, each only inside a function: ``txnlog serve``
loads the wire server when it runs, ``txnlog users`` and ``txnlog acls`` the users-file and
ACL-file code they share with it, so
nothing else in the engine or its CLI ever does."""


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots & (PROJECT | THIRD_PARTY)


def package_files(package: str) -> list[Path]:
    if package == "pyspark_txnlog":
        return [ROOT / "pyspark_txnlog.py"]
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down_the_table(package: str) -> None:
    files = package_files(package)
    assert files, f"package {package} has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(forbidden)
        for path in files
        if (forbidden := imported_roots(path) - ALLOWED[package] - _lazy_allowed(path))
    }
    assert offenders == {}


def _lazy_allowed(path: Path) -> set[str]:
    """The roots ``LAZY_EDGES`` allows ``path`` to import, if it imports them in functions only."""
    allowed = LAZY_EDGES.get(str(path.relative_to(ROOT)), set())
    return allowed - top_level_roots(path)


def top_level_roots(path: Path) -> set[str]:
    """Roots imported outside any function (at module level, in classes, under ``if``)."""
    roots: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                roots.update(alias.name.split(".")[0] for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                roots.add(child.module.split(".")[0])
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return roots


def test_the_serve_command_imports_the_wire_server_lazily_only(tmp_path: Path) -> None:
    """DESIGN §1: ``txnlog serve`` may import ``txn_wire`` inside its command; at module level
    it would be an engine module importing a package above it, and the checker says so."""
    serve = ROOT / "txn_log" / "cli" / "serve.py"
    assert "txn_wire" in imported_roots(serve)
    assert "txn_wire" not in top_level_roots(serve)
    eager = tmp_path / "eager.py"
    eager.write_text("from txn_wire.server import serve\ndef f():\n    import txn_wire\n")
    assert top_level_roots(eager) == {"txn_wire"}


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pyspark.sql\nfrom txn_sink import writer\n")
    assert imported_roots(bad) == {"pyspark", "txn_sink"}


def test_importing_the_engine_loads_no_spark_no_arrow_and_no_client() -> None:
    """``import txn_log`` (for its exports, issue 13) stays cheap: pyarrow, numpy and pyspark
    load only where Arrow data is built, and ``Log`` and the clients only when first used."""
    code = (
        "import sys, txn_log; from txn_log import TopicPartition, TxnLogError, ConfigError; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pyarrow', 'numpy', 'pyspark', 'py4j'} or m in "
        "{'txn_log.log', 'txn_log.producer.producer', 'txn_log.consumer.consumer'})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


# --- the engine knows nothing of Spark (issue 13 item 2) ---------------------------------------

SPARK_WORDS = re.compile(r"spark|sink|batch_?id", re.IGNORECASE)
"""What only the Spark packages may speak of: Spark itself, sinks, Spark's batch ids."""
FORMAT_MODULES = {
    "txn_log.coordinator.state_log_format",
    "txn_log.coordinator.atomic_commit_format",
    "txn_log.coordinator.protocol_types",
}
"""The coordinator's record formats: only the engine reads or writes those bytes."""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _names(node: ast.AST) -> list[str]:
    """The identifiers ``node`` itself introduces or uses (not those of its children)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg | ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return []


def code_words(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every identifier and every string literal that is not a docstring.

    Comments and docstrings are prose: they may name Spark to explain the boundary (why the
    engine offers what it offers). Names and strings are what the engine does and says.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstrings(tree)
    words: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append((line, node.value))
        else:
            words += [(line, name) for name in _names(node)]
    return words


def spark_words(path: Path) -> list[str]:
    return [f"{line}: {text!r}" for line, text in code_words(path) if SPARK_WORDS.search(text)]


def test_the_engine_speaks_no_spark() -> None:
    """DESIGN §1: no identifier or string literal in ``txn_log`` names Spark, a sink or a batch
    id. The engine offers the atomic commit of many transactions under an opaque ledger key
    (the sink chooses what the key means) and its own Arrow record schema (the source builds
    Spark's columns from it)."""
    offenders = {
        str(path.relative_to(ROOT)): words
        for path in package_files("txn_log")
        if (words := spark_words(path))
    }
    assert offenders == {}


def test_the_spark_word_check_sees_names_and_strings_but_not_prose(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""A module about Spark (prose)."""\n'
        "# a sink comment (prose)\n"
        "def commit(sink_id: str, sequence: int) -> str:\n"
        '    """Docstrings may say batch_id."""\n'
        '    spark = f"batch {sequence}"\n'
        "    return g(batchId=spark)\n"
    )
    found = sorted(word for _, word in code_words(sample) if SPARK_WORDS.search(word))
    assert found == ["batchId", "sink_id", "spark", "spark"]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


@pytest.mark.parametrize("package", sorted(set(ALLOWED) - {"txn_log"} | {"demo", "bench"}))
def test_only_the_engine_imports_the_coordinators_record_formats(package: str) -> None:
    """The commit protocol, the sink and the source own their value types (task transaction
    references, ledger entries): none imports the state log's record formats."""
    files = package_files(package)
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_modules(path) & FORMAT_MODULES)
        for path in files
        if imported_modules(path) & FORMAT_MODULES
    }
    assert offenders == {}


# --- inside the engine (issue 13 item 1) --------------------------------------------------------

ENGINE = "txn_log"
ENGINE_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "ground",
        frozenset(
            {
                "txn_log.errors",
                "txn_log.clock",
                "txn_log.fault_points",
                "txn_log.owned_fd",
                "txn_log.file_lock",
                "txn_log.topic_partition",
                "txn_log.partitioner",
            }
        ),
    ),
    ("record", frozenset({"txn_log.record"})),
    # topic_config stays at the root: storage reads it and it reads record's header types
    ("storage", frozenset({"txn_log.storage", "txn_log.topic_config"})),
    ("log directory", frozenset({"txn_log.log_dir"})),
    ("groups", frozenset({"txn_log.group"})),
    ("coordinator", frozenset({"txn_log.coordinator"})),
    ("clients", frozenset({"txn_log.producer", "txn_log.consumer"})),
    ("log facade", frozenset({"txn_log.log", "txn_log.log_metrics", "txn_log"})),
    ("cli", frozenset({"txn_log.cli"})),
)
"""Lowest first; a name stands for that module or package and everything under it, except
``txn_log`` itself, which is only the package root (its exports)."""


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package by its own)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports, by every import statement anywhere in
    it: at the top, under ``if TYPE_CHECKING:``, inside functions. ``from p import m`` is an
    edge to ``p.m`` when ``m`` is a module of ``p``, else to ``p`` (as ``import p.m`` is an
    edge to ``p.m`` alone)."""
    modules = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def engine_layer(module: str) -> int:
    """The rank of ``module``'s layer in ``ENGINE_LAYERS``; KeyError if none claims it."""
    for rank, (_, names) in enumerate(ENGINE_LAYERS):
        for name in names:
            if module == name or (name != ENGINE and module.startswith(name + ".")):
                return rank
    raise KeyError(module)


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} ({ENGINE_LAYERS[engine_layer(source)][0]}) imports {target} "
        f"({ENGINE_LAYERS[engine_layer(target)][0]})"
        for source, targets in graph.items()
        for target in targets
        if engine_layer(target) > engine_layer(source)
    )


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_every_engine_module_has_a_layer() -> None:
    unplaced = []
    for module in module_names(ROOT, ENGINE):
        try:
            engine_layer(module)
        except KeyError:
            unplaced.append(module)
    assert unplaced == [], "add these modules to ENGINE_LAYERS"


def test_engine_imports_point_down_its_layers() -> None:
    """record ← storage ← coordinator and clients ← ``Log`` ← CLI (DESIGN §1): no module
    imports a layer above its own, not even for type checking or inside a function."""
    assert upward_edges(import_graph(ROOT, ENGINE)) == []


def test_engine_modules_import_no_circle() -> None:
    """No two engine modules import each other, directly or round a longer circle (again
    counting imports for type checking and inside functions)."""
    assert import_cycles(import_graph(ROOT, ENGINE)) == []


@pytest.mark.parametrize("package", sorted(set(ALLOWED) - {"pyspark_txnlog"}))
def test_package_modules_import_no_circle(package: str) -> None:
    """No two modules of any package import each other, directly or round a longer circle
    (``pyspark_txnlog`` is one file)."""
    assert import_cycles(import_graph(ROOT, package)) == []


def test_engine_checker_sees_hidden_imports_and_circles(tmp_path: Path) -> None:
    package = tmp_path / ENGINE
    (package / "storage").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "storage" / "__init__.py").write_text("")
    (package / "errors.py").write_text("")
    (package / "log.py").write_text("from txn_log.storage import thing\n")
    (package / "storage" / "thing.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from txn_log.log import Log\n"
        "def f():\n    from .. import errors\n    import txn_log.log\n"
        "def g():\n    from txn_log import Log\n"
    )
    graph = import_graph(tmp_path, ENGINE)
    assert graph["txn_log.storage.thing"] == {"txn_log", "txn_log.errors", "txn_log.log"}
    assert graph["txn_log.log"] == {"txn_log.storage.thing"}
    assert upward_edges(graph) == [
        "txn_log.storage.thing (storage) imports txn_log (log facade)",
        "txn_log.storage.thing (storage) imports txn_log.log (log facade)",
    ]
    assert import_cycles(graph) == [["txn_log.log", "txn_log.storage.thing"]]


def test_the_engine_tree_is_its_layers() -> None:
    """The folders of ``txn_log`` are its layers' rooms: every sub-package is named whole in
    ``ENGINE_LAYERS``, and every other name there is a loose module of the root."""
    named = {name for _, names in ENGINE_LAYERS for name in names} - {ENGINE}
    folders = {f"{ENGINE}.{path.parent.name}" for path in (ROOT / ENGINE).glob("*/__init__.py")}
    loose = {f"{ENGINE}.{path.stem}" for path in (ROOT / ENGINE).glob("*.py")} - {
        f"{ENGINE}.__init__"
    }
    assert folders <= named, "name each folder of txn_log in ENGINE_LAYERS"
    assert named - folders == loose
