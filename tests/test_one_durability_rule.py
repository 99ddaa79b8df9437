"""One durability rule and one positional-I/O helper (issue 13 item 5), held by reading the
code: a fourth "write a file atomically" helper, or a second pread loop, cannot come back.

- Replacing a file (``os.replace``/``os.rename``, ``shutil.move``, ``tempfile``,
  ``Path.write_bytes``/``write_text``/``rename``/``replace``, ``open(..., "w")``) happens only in
  ``txn_log/storage/durable_file.py`` (write, fsync the file, rename, fsync the directory).
- ``os.pread``/``os.pwrite``/``os.write`` appear only in ``txn_log/storage/file_io.py``, whose
  loops finish short reads and writes.
- Directories are created only by ``durable_file.make_directory`` (mkdir, fsync the parent).
- Creating a file with ``O_CREAT`` is allowed only where ``durable_file``'s docstring says why
  that file needs no rename (appended segment and index files, lock files, the housekeeping
  stamp); a new place must be added to ``CREATORS`` below with its reason.

The scan covers every package of the project (DESIGN §1), Spark's side included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("txn_log", "offsets", "commit_protocol", "datasource_options", "txn_source", "txn_sink")
DURABLE_FILE = "txn_log/storage/durable_file.py"
FILE_IO = "txn_log/storage/file_io.py"

# module -> names whose use replaces, moves or writes whole files
REPLACING = {
    "os": {"replace", "rename", "renames"},
    "shutil": {"move", "copy", "copy2", "copyfile", "copytree"},
    "tempfile": None,  # every name: temporary files belong to durable_file
}
POSITIONAL_IO = {"pread", "pwrite", "write", "read"}
PATH_WRITERS = {"write_bytes", "write_text"}
PATH_RENAMES = {"rename", "replace"}  # Path.rename(target) / Path.replace(target): one argument
# file -> why it may create a file with O_CREAT without the temp-file-and-rename rule
CREATORS = {
    DURABLE_FILE: "the temporary file of write_durably",
    "txn_log/storage/segment.py": "segment .log files, appended in place; the partition log "
    "fsyncs the directory before a batch in a new one is acknowledged",
    "txn_log/storage/entry_file.py": "offset/time/aborted-transaction indexes, appended in place",
    "txn_log/file_lock.py": "lock files: their flock, and a hold count that need not outlive "
    "a machine crash (every process starts again)",
    "txn_log/group/group_activity.py": "group lock files: only their flock matters",
    "txn_log/log_dir/housekeeping.py": "the housekeeping lock, whose stamp is advisory",
}


def project_files() -> list[Path]:
    files = [ROOT / "pyspark_txnlog.py"]
    for package in PACKAGES:
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def call_sites(path: Path) -> dict[str, list[str]]:
    """kind -> ``file:line name`` of every file-replacing call, positional I/O call and
    ``O_CREAT`` in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    found: dict[str, list[str]] = {"replace": [], "io": [], "create": [], "mkdir": []}

    def add(kind: str, node: ast.AST, name: str) -> None:
        found[kind].append(f"{where}:{getattr(node, 'lineno', 0)} {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tempfile":
                    add("replace", node, "import tempfile")
        elif isinstance(node, ast.ImportFrom) and node.module in REPLACING:
            wanted = REPLACING[node.module]
            for alias in node.names:
                if wanted is None or alias.name in wanted:
                    add("replace", node, f"from {node.module} import {alias.name}")
                if node.module == "os" and alias.name in POSITIONAL_IO:
                    add("io", node, f"from os import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module, name = node.value.id, node.attr
            wanted = REPLACING.get(module, set())
            if module in REPLACING and (wanted is None or name in wanted):
                add("replace", node, f"{module}.{name}")
            if module == "os" and name in POSITIONAL_IO:
                add("io", node, f"os.{name}")
            if module == "os" and name == "O_CREAT":
                add("create", node, "os.O_CREAT")
            if module == "os" and name in ("mkdir", "makedirs"):
                add("mkdir", node, f"os.{name}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in PATH_WRITERS:
                add("replace", node, f".{func.attr}()")
            if isinstance(func, ast.Attribute) and func.attr == "mkdir":
                add("mkdir", node, ".mkdir()")
            if (
                isinstance(func, ast.Attribute)
                and func.attr in PATH_RENAMES
                and len(node.args) == 1  # str.replace and bytes.replace take two
                and not node.keywords
            ):
                add("replace", node, f".{func.attr}(target)")
            if isinstance(func, ast.Name) and func.id == "open" and _writes(node):
                add("replace", node, "open(..., write mode)")
    return found


def _writes(call: ast.Call) -> bool:
    modes = list(call.args[1:2]) + [k.value for k in call.keywords if k.arg == "mode"]
    return any(
        not isinstance(mode, ast.Constant) or any(c in str(mode.value) for c in "wax+")
        for mode in modes
    )


def all_sites(kind: str) -> dict[str, list[str]]:
    """file -> its call sites of ``kind``, over every project file that has any."""
    out = {}
    for path in project_files():
        sites = call_sites(path)[kind]
        if sites:
            out[str(path.relative_to(ROOT))] = sites
    return out


def test_only_durable_file_replaces_files() -> None:
    """Every "replace a file" goes through ``write_durably``: nothing else renames, moves or
    writes a whole file, and nothing makes temporary files of its own."""
    sites = all_sites("replace")
    assert set(sites) == {DURABLE_FILE}, sites
    assert [site.split(" ", 1)[1] for site in sites[DURABLE_FILE]] == ["os.replace"]


def test_only_file_io_calls_pread_and_pwrite() -> None:
    """One ``pread_fully`` and one ``write_all``: every other module reads and writes through
    them, so no caller forgets that a read or write may come back short."""
    assert set(all_sites("io")) == {FILE_IO}, all_sites("io")


def test_directories_are_created_only_by_make_directory() -> None:
    """A directory created must be fsynced into its parent, or a machine crash can take it
    away with everything acknowledged in it."""
    sites = all_sites("mkdir")
    assert set(sites) == {DURABLE_FILE}, sites


def test_files_are_created_only_where_the_rule_says_why() -> None:
    sites = all_sites("create")
    assert set(sites) <= set(CREATORS), {f: s for f, s in sites.items() if f not in CREATORS}
    documented = (ROOT / DURABLE_FILE).read_text()
    for path in CREATORS:
        if path != DURABLE_FILE:
            assert Path(path).name in documented, f"durable_file's docstring must say why {path}"


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import os\nos.rename('a', 'b')\n", "replace"),
        ("from os import replace\n", "replace"),
        ("import tempfile\n", "replace"),
        ("import shutil\nshutil.move('a', 'b')\n", "replace"),
        ("from pathlib import Path\nPath('a').write_text('x')\n", "replace"),
        ("from pathlib import Path\nPath('a').replace(Path('b'))\n", "replace"),
        ("open('a', 'wb').write(b'x')\n", "replace"),
        ("open('a', mode='a')\n", "replace"),
        ("import os\nos.pread(0, 1, 0)\n", "io"),
        ("import os\nos.write(1, b'x')\n", "io"),
        ("import os\nos.open('a', os.O_RDWR | os.O_CREAT)\n", "create"),
        ("from pathlib import Path\nPath('a').mkdir(parents=True)\n", "mkdir"),
        ("import os\nos.makedirs('a/b')\n", "mkdir"),
    ],
)
def test_the_scan_sees_each_forbidden_call(tmp_path: Path, source: str, kind: str) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(source)
    assert call_sites(bad)[kind], source


def test_the_scan_leaves_string_replace_and_reads_alone(tmp_path: Path) -> None:
    fine = tmp_path / "fine.py"
    fine.write_text(
        "import dataclasses\n"
        "name = 'a.b'.replace('.', '-')\n"
        "data = b'ab'.replace(b'a', b'c')\n"
        "x = dataclasses.replace(object(), y=1)\n"
        "text = open('a', 'rb').read()\n"
    )
    assert call_sites(fine) == {"replace": [], "io": [], "create": [], "mkdir": []}
