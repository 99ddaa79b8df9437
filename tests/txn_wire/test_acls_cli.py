"""``txnlog acls list|add|remove`` (kafka-acls) on the ACL file of ``txnlog serve``: Kafka's
options, comments kept, atomic and serialised edits (several editor processes at once lose
nothing), a running server applying each change to its next request (it re-reads the file
when it changes, and keeps its rules when the file no longer loads), and refusals that leave
the file as it was."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.txn_wire.serve_process import TXNLOG, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition
from txn_wire.acl import Operation, ResourceType, load_acls

DELETE_GROUPS, GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND = 42, 30, 69
HEADER = "# the server's rules\nUser:ANONYMOUS topic orders Read allow  # readers\n"


def acls(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TXNLOG, "acls", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_add_list_remove_keep_comments(tmp_path: Path) -> None:
    path = tmp_path / "acls.txt"
    path.write_text(HEADER)
    added = acls(
        "add",
        path,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "copier-",
        "--resource-pattern-type",
        "prefixed",
        "--group",
        "g",
    )
    assert added.returncode == 0, added.stderr
    assert "Added 4 rule(s)" in added.stdout
    again = acls(
        "add",
        path,
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
        "--topic",
        "copier-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert "Added 0 rule(s)" in again.stdout and "(1 already there)" in again.stdout
    denied = acls("add", path, "--deny-principal", "User:*", "--operation", "All", "--cluster")
    assert denied.returncode == 0
    assert path.read_text() == HEADER + (
        "User:alice topic copier-* Read allow\n"
        "User:alice group g* Read allow\n"
        "User:alice topic copier-* Write allow\n"
        "User:alice group g* Write allow\n"
        "User:* cluster kafka-cluster All deny\n"
    )
    listed = acls(
        "list", path, "--topic", "copier-", "--resource-pattern-type", "prefixed", "--json"
    )
    assert json.loads(listed.stdout) == [
        {
            "principal": "User:alice",
            "resource_type": "topic",
            "name": "copier-",
            "pattern_type": "prefixed",
            "operation": op,
            "permission": "allow",
        }
        for op in ("Read", "Write")
    ]
    removed = acls(
        "remove",
        path,
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--group",
        "g",
        "--topic",
        "copier-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert removed.returncode == 0 and "Removed 2 rule(s)" in removed.stdout
    authorizer = load_acls(path)  # what the server will read
    assert authorizer.allows("User:alice", ResourceType.TOPIC, "copier-7", Operation.READ)
    assert not authorizer.allows("User:alice", ResourceType.TOPIC, "copier-7", Operation.WRITE)
    assert path.read_text().startswith(HEADER)
    nothing = acls(
        "remove", path, "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders"
    )
    assert nothing.returncode == 1 and "no rule of" in nothing.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--allow-principal", "alice", "--operation", "Read", "--topic", "t"],
            "principal 'alice' must be User:NAME or User:*",
        ),
        (
            ["--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
            "operation 'Fly' is not one of ['Read', 'Write'",
        ),
        (["--allow-principal", "User:a", "--operation", "Read"], "add needs a resource"),
        (["--allow-principal", "User:a", "--topic", "t"], "and an --operation (Read, Write"),
        (
            ["--allow-principal", "User:a", "--operation", "Read", "--topic", "t*"],
            "give a literal name, '*' for every name, or a prefix with --resource-pattern-type",
        ),
    ],
)
def test_refusals_name_what_is_valid_and_leave_the_file(
    tmp_path: Path, options: list[str], message: str
) -> None:
    path = tmp_path / "acls.txt"
    path.write_text(HEADER)
    result = acls("add", path, *options)
    assert result.returncode == 2 and message in result.stderr, result
    assert path.read_text() == HEADER


def test_a_broken_file_is_refused_naming_its_line_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "acls.txt"
    path.write_text(HEADER + "User:x topic\n")
    for action in ("add", "remove"):
        result = acls(
            action, path, "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"
        )
        assert result.returncode == 2 and "line 3: expected 5 fields" in result.stderr
    assert path.read_text() == HEADER + "User:x topic\n"


def test_editors_at_once_lose_nothing_and_a_running_server_applies_the_rules_at_once(
    tmp_path: Path,
) -> None:
    """Several ``txnlog acls add`` processes edit the file of a running server at once: every
    rule lands, the file always parses; the running server applies them to its next request
    (DeleteGroups refused before the grant, answered after), and a file broken by hand
    afterwards leaves it with the rules it held."""
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("orders", 1)
        log.group_offsets.commit("doomed", {TopicPartition("orders", 0): 1})
    path = tmp_path / "acls.txt"
    path.write_text(HEADER)
    served = start_serve(log_dir, "--acl-file", str(path))
    try:
        client = RawClient(served.port)
        answer = client.request(DELETE_GROUPS, 2, {"groups_names": ["doomed"]})
        assert answer["results"][0]["error_code"] == GROUP_AUTHORIZATION_FAILED
        editors = [
            subprocess.Popen(
                [
                    TXNLOG,
                    "acls",
                    "add",
                    str(path),
                    "--allow-principal",
                    f"User:u{n}",
                    "--operation",
                    "Read",
                    *[a for i in range(5) for a in ("--topic", f"t{n}-{i}")],
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        granted = acls(
            "add",
            path,
            "--allow-principal",
            "User:ANONYMOUS",
            "--operation",
            "Delete",
            "--group",
            "doomed",
        )
        assert granted.returncode == 0
        for editor in editors:
            out, err = editor.communicate(timeout=120)
            assert editor.returncode == 0 and "Added 5 rule(s)" in out, err
        rules = load_acls(path).rules
        assert len(rules) == 1 + 4 * 5 + 1
        answer = client.request(DELETE_GROUPS, 2, {"groups_names": ["doomed"]})
        assert answer["results"][0]["error_code"] == 0  # applied on the same connection
        path.write_text(path.read_text() + "User:ANONYMOUS topic orders NotAnOperation allow\n")
        answer = client.request(DELETE_GROUPS, 2, {"groups_names": ["doomed"]})
        client.close()
        assert answer["results"][0]["error_code"] == GROUP_ID_NOT_FOUND  # still authorized
        assert served.process.poll() is None
    finally:
        served.stop()
