"""The repository explains its own citations (issue 13 item 6): every rule id cited in the code,
the tests and the README has a described row in ``docs/rules.md``; every ``DESIGN §N`` names a
section of ``docs/design.md``; every ``STYLE n`` / ``TESTING n`` an item of
``docs/conventions.md``. Nothing here reads outside the repository."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load_rules_index() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rules_index", DOCS / "rules_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rules_index", module)
    spec.loader.exec_module(module)
    return module


rules_index = _load_rules_index()


def _sources() -> dict[str, str]:
    """Repository-relative path -> text of every file whose citations must resolve."""
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in rules_index.source_files(ROOT)
    }


def _where(pattern: re.Pattern[str], wanted: str, sources: dict[str, str]) -> list[str]:
    return sorted(path for path, text in sources.items() if wanted in pattern.findall(text))


# --- rule ids -------------------------------------------------------------------------------


def test_every_cited_rule_id_has_a_row_with_a_description() -> None:
    citations = rules_index.scan(ROOT)
    rules = (DOCS / "rules.md").read_text(encoding="utf-8")
    descriptions = rules_index.read_descriptions(rules_index.generated_block(rules))
    missing = sorted(
        (rule_id for rule_id in citations.ids() if not descriptions.get(rule_id)),
        key=rules_index.sort_key,
    )
    where = {
        rule_id: sorted(
            citations.implemented.get(rule_id, set()) | citations.tested.get(rule_id, set())
        )
        for rule_id in missing
    }
    assert not missing, (
        "rule ids cited without a described row in docs/rules.md (run python docs/rules_index.py, "
        f"then write the description): {where}"
    )


def test_the_scan_sees_every_id_written_in_the_sources() -> None:
    """A cross-check of the scanner with a pattern of its own, so a broken scan cannot hide
    missing rows: every prefix-dash-two-digits word that is not a KIP number is a rule id."""
    sources = _sources()
    assert "README.md" in sources and "txn_log/storage/partition_log.py" in sources
    written = {
        match
        for text in sources.values()
        for match in re.findall(r"\b(?!KIP-)(?:[A-Z]{1,3})-\d{2}\b", text)
    }
    unknown = sorted(i for i in written if i.rsplit("-", 1)[0] not in rules_index.PREFIXES)
    assert not unknown, (
        f"{unknown} look like rule ids with a prefix docs/rules_index.py does not know: add the "
        "prefix to its SECTIONS if they are rule ids, otherwise reword them"
    )
    scanned = rules_index.scan(ROOT).ids()
    assert written <= scanned, f"ids the scan misses: {sorted(written - scanned)}"
    assert len(scanned) >= 100, f"only {len(scanned)} rule ids found: is the scan broken?"


def test_rule_rows_are_unique() -> None:
    block = rules_index.generated_block((DOCS / "rules.md").read_text(encoding="utf-8"))
    ids = [m.group(1) for line in block.splitlines() if (m := rules_index.ROW_RE.match(line))]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"ids with more than one row in docs/rules.md: {duplicates}"


# --- DESIGN §N ------------------------------------------------------------------------------

DESIGN_CITATION = re.compile(r'\bDESIGN(?:\.md)?\s*((?:§\d+(?:-\d+)?(?:,\s*)?)+)(?:\s*"([^"]+)")?')


def _design_sections() -> dict[int, str]:
    """Section number -> its text (heading and subsections) in docs/design.md."""
    sections: dict[int, str] = {}
    current: int | None = None
    for line in (DOCS / "design.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## §(\d+)\b", line)
        if heading:
            current = int(heading.group(1))
            sections[current] = ""
        elif line.startswith("## "):
            current = None
        if current is not None:
            sections[current] += line + "\n"
    return sections


def _numbers(spec: str) -> set[int]:
    """``"§1, §4-5"`` -> {1, 4, 5}."""
    found: set[int] = set()
    for first, last in re.findall(r"§(\d+)(?:-(\d+))?", spec):
        found.update(range(int(first), int(last or first) + 1))
    return found


def test_every_design_section_cited_exists() -> None:
    sections = _design_sections()
    assert set(range(1, 8)) <= set(sections), f"design.md sections: {sorted(sections)}"
    problems = []
    for path, text in _sources().items():
        for match in DESIGN_CITATION.finditer(text):
            for number in sorted(_numbers(match.group(1)) - set(sections)):
                problems.append(f"{path}: DESIGN §{number}")
            title = match.group(2)
            if title:
                numbers = _numbers(match.group(1))
                if not any(
                    re.search(rf"^###.*{re.escape(title)}", sections.get(n, ""), re.M)
                    for n in numbers
                ):
                    problems.append(f'{path}: DESIGN §{min(numbers)} "{title}"')
    assert not problems, f"citations of sections docs/design.md lacks: {problems}"


# --- STYLE n, TESTING n ---------------------------------------------------------------------

CONVENTION_CITATION = re.compile(
    r"\b(STYLE|TESTING)(?:\.md)?\s+(?:(?:items?|scenarios?)\s+|§)?(\d+)"
    r"((?:\s*(?:/|,|-|and)\s*\d+)*)"
)


def _convention_items() -> dict[str, set[int]]:
    items: dict[str, set[int]] = {"STYLE": set(), "TESTING": set()}
    current: str | None = None
    for line in (DOCS / "conventions.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (STYLE|TESTING)\b", line)
        if heading:
            current = heading.group(1)
        elif current and (item := re.match(r"^(\d+)\. ", line)):
            items[current].add(int(item.group(1)))
    return items


def test_every_style_and_testing_item_cited_exists() -> None:
    items = _convention_items()
    assert items["STYLE"] and items["TESTING"], items
    problems = []
    for path, text in _sources().items():
        for kind, first, rest in CONVENTION_CITATION.findall(text):
            numbers = {int(first)}
            for separator, number in re.findall(r"(/|,|-|and)\s*(\d+)", rest):
                if separator == "-":
                    numbers.update(range(max(numbers) + 1, int(number) + 1))
                numbers.add(int(number))
            problems += [f"{path}: {kind} {n}" for n in sorted(numbers - items[kind])]
    assert not problems, f"citations of items docs/conventions.md lacks: {problems}"


PRODUCT = ("txn_log", "txn_wire", "txn_source", "txn_sink", "commit_protocol",
           "datasource_options", "offsets", "pyspark_txnlog.py")  # fmt: skip
RULE_ID = re.compile(r"\b[A-Z]{1,4}-\d{2}\b")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string statements of ``tree``: module, class and function docstrings, and
    the strings documenting an attribute."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                found.add(id(statement.value))
    return found


def test_no_internal_rule_id_reaches_a_user_facing_message() -> None:
    """Issue 26 item 8: rule ids (``C-03``, ``MET-01``) explain the code to its readers, in
    docstrings, comments and tests; an error, a help text or a metric's HELP line speaks to a
    user, who has no checklist to look them up in."""
    found = []
    for name in PRODUCT:
        root = ROOT / name
        for path in [root] if root.suffix == ".py" else sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                    and RULE_ID.search(node.value)
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}")
    assert not found, "\n".join(found)
