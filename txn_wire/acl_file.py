"""Editing the ACL file of ``txnlog serve --acl-file`` (format: ``acl``), for ``txnlog acls``
(kafka-acls --list / --add / --remove).

- A rule is one line; adding writes the lines not already there after the file's text,
  removing drops the lines whose rule matches (the rules given, or those a predicate picks:
  DeleteAcls' filters), and every other line (comments, blank lines, other rules) is kept as
  it is.
- Validate, then change (STYLE 3): the file is read and parsed whole first (a broken file is
  refused, naming its line, and left alone), and the new text is parsed again before it is
  written, so the file never holds what the server would refuse to start with.
- Atomic and durable: the new text replaces the file through the one durable-file rule
  (``durable_file``: temp file, fsync, rename, directory fsync), so a server starting at any
  moment reads the old file or the new one, never a mix. Editors serialise on
  ``<file>.lock`` (an flock), so two ``txnlog acls`` runs never lose each other's change.
- ``txnlog serve`` re-reads the file when it changes (``WatchedFile``): an edit applies to
  its next request, as Kafka applies ``kafka-acls`` at once.

Thread- and process-safe as described.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from txn_log.storage.durable_file import write_durably
from txn_wire.acl import AclFileError, AclRule, load_acls, parse_rules
from txn_wire.watched_file import editor_lock


def format_rule(rule: AclRule) -> str:
    """``rule`` as a line of the file."""
    permission = "allow" if rule.allow else "deny"
    return (
        f"{rule.principal} {rule.resource_type.value} {rule.name} {rule.operation.value} "
        f"{permission}"
    )


def read_rules(path: Path) -> list[AclRule]:
    """The file's rules, in order; AclFileError naming the line of a broken one."""
    return list(load_acls(path).rules)


def add_rules(path: Path, rules: Iterable[AclRule]) -> list[AclRule]:
    """Append the rules ``path`` does not hold yet (the file is created if missing); returns
    those added."""
    with editor_lock(path):
        text = path.read_text() if path.exists() else ""
        existing = set(parse_rules(text, str(path))) if text else set()
        added = [rule for rule in dict.fromkeys(rules) if rule not in existing]
        if added:
            tail = "" if not text or text.endswith("\n") else "\n"
            new_text = text + tail + "".join(format_rule(rule) + "\n" for rule in added)
            _replace(path, new_text)
        return added


def remove_rules(path: Path, rules: Iterable[AclRule]) -> list[AclRule]:
    """Drop every line of ``path`` holding one of ``rules``; returns the rules removed (in file
    order). AclFileError if the file is missing."""
    doomed = set(rules)
    return remove_matching(path, [doomed.__contains__])[0]


def remove_matching(
    path: Path, predicates: Sequence[Callable[[AclRule], bool]]
) -> list[list[AclRule]]:
    """Drop, in one replacement, every line of ``path`` whose rule some predicate picks;
    returns, per predicate, the rules of the lines it picked (in file order: a line picked by
    two predicates is reported under both). AclFileError if the file is missing."""
    with editor_lock(path):
        if not path.exists():
            raise AclFileError(f"ACL file {path}: no such file")
        kept: list[str] = []
        removed: list[list[AclRule]] = [[] for _ in predicates]
        text = path.read_text()
        parse_rules(text, str(path))  # refuse a broken file before anything else
        for line in text.splitlines(keepends=True):
            parsed = parse_rules(line, str(path))
            picked = [i for i, p in enumerate(predicates) if parsed and p(parsed[0])]
            for i in picked:
                removed[i].append(parsed[0])
            if not picked:
                kept.append(line)
        if any(removed):
            _replace(path, "".join(kept))
        return removed


def _replace(path: Path, text: str) -> None:
    parse_rules(text, str(path))  # never write what the server would refuse
    write_durably(path, text.encode())
