"""Kafka's ACL bindings over the ACL file (``txn_wire.acl_binding``, R-12): every creation the
file can hold goes to one line and comes back as the same binding; every one it cannot hold is
refused naming what; filters match as Kafka's ``AclBindingFilter``; unknown codes are refused.
Also super users (``Authorizer``) and removal by filter (``acl_file.remove_matching``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from txn_wire.acl import (
    AclRule,
    Authorizer,
    Operation,
    ResourceType,
    load_acls,
    parse_rules,
    parse_super_users,
)
from txn_wire.acl_binding import (
    AclBinding,
    InvalidAclError,
    creation_rule,
    filter_of,
)
from txn_wire.acl_file import format_rule, remove_matching

TOPIC, GROUP, CLUSTER, TXN, USER, TOKEN = 2, 3, 4, 5, 7, 6
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, DESCRIBE, IDEMPOTENT_WRITE, CREATE_TOKENS = 2, 3, 4, 8, 12, 13
DENY, ALLOW = 2, 3


def creation(**changes: Any) -> dict[str, Any]:
    fields = {
        "resource_type": TOPIC,
        "resource_name": "orders",
        "resource_pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": READ,
        "permission_type": ALLOW,
    }
    return {**fields, **changes}


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({}, "User:alice topic orders Read allow"),
        (
            {"resource_pattern_type": PREFIXED, "resource_name": "copier-"},
            "User:alice topic copier-* Read allow",
        ),
        ({"resource_name": "*"}, "User:alice topic * Read allow"),
        (
            {"resource_pattern_type": PREFIXED, "resource_name": "a*"},
            "User:alice topic a** Read allow",
        ),
        (
            {"resource_type": GROUP, "operation": ALL, "permission_type": DENY},
            "User:alice group orders All deny",
        ),
        (
            {
                "resource_type": CLUSTER,
                "resource_name": "kafka-cluster",
                "operation": IDEMPOTENT_WRITE,
            },
            "User:alice cluster kafka-cluster IdempotentWrite allow",
        ),
        (
            {"resource_type": TXN, "principal": "User:*", "operation": WRITE},
            "User:* transactional_id orders Write allow",
        ),
    ],
)
def test_a_creation_the_file_can_hold_is_one_line_and_reads_back_as_the_same_binding(
    changes: dict[str, Any], line: str
) -> None:
    rule = creation_rule(creation(**changes))
    assert format_rule(rule) == line
    assert parse_rules(line, "test") == [rule]
    wire = {**creation(**changes)}
    wire["pattern_type"] = wire.pop("resource_pattern_type")
    assert AclBinding.of_rule(rule).fields() == wire


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"resource_type": CLUSTER},
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        ({"resource_name": ""}, "Invalid empty resource name"),
        ({"resource_type": ANY}, "Invalid resourceType ANY"),
        ({"resource_type": 99}, "Invalid resourceType UNKNOWN (code 99)"),
        ({"resource_type": 0}, "Invalid resourceType UNKNOWN (code 0)"),
        ({"resource_pattern_type": MATCH}, "Invalid patternType MATCH"),
        ({"resource_pattern_type": -1}, "Invalid patternType UNKNOWN (code -1)"),
        ({"operation": ANY}, "Invalid operation ANY"),
        ({"operation": 120}, "Invalid operation UNKNOWN (code 120)"),
        ({"permission_type": ANY}, "Invalid permissionType ANY"),
        ({"permission_type": 4}, "Invalid permissionType UNKNOWN (code 4)"),
        ({"resource_type": USER}, "resource type USER is not supported"),
        ({"resource_type": TOKEN}, "resource type DELEGATION_TOKEN is not supported"),
        ({"operation": CREATE_TOKENS}, "operation CREATE_TOKENS is not supported"),
        ({"host": "10.0.0.7"}, "host '10.0.0.7': host-specific ACLs are not supported"),
        ({"host": ""}, "host '': host-specific ACLs are not supported"),
        ({"principal": "Group:ops"}, "principal 'Group:ops'"),
        ({"principal": "User:"}, "principal 'User:'"),
        ({"principal": "alice"}, "principal 'alice'"),
        ({"principal": "User:al ice"}, "principal 'User:al ice' holds whitespace or '#'"),
        ({"resource_name": "abc*"}, "resource name 'abc*' (LITERAL) ends in '*'"),
        ({"resource_name": "a b"}, "resource name 'a b' holds whitespace or '#'"),
        ({"resource_name": "a#b"}, "resource name 'a#b' holds whitespace or '#'"),
        ({"resource_name": "a\nb"}, "resource name 'a\\nb' holds whitespace or '#'"),
        ({"resource_name": "a\x1cb"}, "resource name 'a\\x1cb' holds whitespace or '#'"),
        ({"resource_name": "a\u2028b"}, "resource name 'a\\u2028b' holds whitespace or '#'"),
    ],
)
def test_a_creation_the_file_cannot_hold_exactly_is_refused_naming_it(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidAclError) as refused:
        creation_rule(creation(**changes))
    assert message in str(refused.value)


RULES = [
    AclRule("User:alice", ResourceType.TOPIC, "orders", Operation.READ, True),  # 0
    AclRule("User:alice", ResourceType.TOPIC, "ord*", Operation.WRITE, True),  # 1
    AclRule("User:bob", ResourceType.TOPIC, "*", Operation.DESCRIBE, False),  # 2
    AclRule("User:bob", ResourceType.TOPIC, "orders-eu", Operation.READ, True),  # 3
    AclRule("User:bob", ResourceType.GROUP, "orders", Operation.READ, True),  # 4
    AclRule("User:*", ResourceType.TOPIC, "o*", Operation.ALL, True),  # 5
    AclRule("User:bob", ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER, True),  # 6
]


def describe_filter(**changes: Any) -> dict[str, Any]:
    fields = {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    return {**fields, **changes}


@pytest.mark.parametrize(
    ("changes", "matched"),
    [
        ({}, [0, 1, 2, 3, 4, 5, 6]),
        ({"resource_type_filter": TOPIC}, [0, 1, 2, 3, 5]),
        ({"resource_type_filter": TOKEN}, []),
        ({"resource_name_filter": "orders", "pattern_type_filter": MATCH}, [0, 1, 2, 4, 5]),
        ({"resource_name_filter": "orders", "pattern_type_filter": LITERAL}, [0, 4]),
        ({"resource_name_filter": "ord", "pattern_type_filter": PREFIXED}, [1]),
        ({"resource_name_filter": "ord", "pattern_type_filter": ANY}, [1]),
        ({"resource_name_filter": "*", "pattern_type_filter": ANY}, [2]),
        ({"resource_name_filter": "*", "pattern_type_filter": MATCH}, [2]),
        (
            {
                "resource_name_filter": "orders-eu",
                "pattern_type_filter": MATCH,
                "resource_type_filter": TOPIC,
            },
            [1, 2, 3, 5],
        ),
        ({"pattern_type_filter": PREFIXED}, [1, 5]),
        ({"pattern_type_filter": LITERAL}, [0, 2, 3, 4, 6]),
        ({"pattern_type_filter": MATCH}, [0, 1, 2, 3, 4, 5, 6]),
        ({"principal_filter": "User:bob"}, [2, 3, 4, 6]),
        ({"principal_filter": "User:*"}, [5]),
        ({"host_filter": "*"}, [0, 1, 2, 3, 4, 5, 6]),
        ({"host_filter": "10.0.0.7"}, []),
        ({"operation": READ}, [0, 3, 4]),
        ({"operation": ALL}, [5]),
        ({"operation": CREATE_TOKENS}, []),
        ({"permission_type": DENY}, [2]),
        (
            {
                "permission_type": ALLOW,
                "principal_filter": "User:bob",
                "resource_type_filter": TOPIC,
            },
            [3],
        ),
    ],
)
def test_filters_match_as_kafkas_acl_binding_filter(
    changes: dict[str, Any], matched: list[int]
) -> None:
    acl_filter = filter_of(describe_filter(**changes))
    found = [i for i, rule in enumerate(RULES) if acl_filter.matches(AclBinding.of_rule(rule))]
    assert found == matched


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"resource_type_filter": 0}, "resource type UNKNOWN (code 0)"),
        ({"resource_type_filter": 42}, "resource type UNKNOWN (code 42)"),
        ({"pattern_type_filter": 0}, "pattern type UNKNOWN (code 0)"),
        ({"pattern_type_filter": 5}, "pattern type UNKNOWN (code 5)"),
        ({"operation": 0}, "operation UNKNOWN (code 0)"),
        ({"operation": -7}, "operation UNKNOWN (code -7)"),
        ({"permission_type": 0}, "permission type UNKNOWN (code 0)"),
        ({"permission_type": 9}, "permission type UNKNOWN (code 9)"),
    ],
)
def test_a_filter_with_an_unknown_code_is_invalid(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidAclError) as refused:
        filter_of(describe_filter(**changes))
    assert message in str(refused.value)


def test_remove_matching_keeps_every_other_line_and_reports_per_filter(tmp_path: Path) -> None:
    path = tmp_path / "acls.txt"
    text = (
        "# the rules\n"
        "User:alice topic orders Read allow  # kept comment\n"
        "\n"
        "User:bob topic orders Read allow\n"
        "User:bob group g Read allow\n"
        "User:alice group g Read allow\n"
    )
    path.write_text(text)
    removed = remove_matching(
        path,
        [
            lambda rule: rule.principal == "User:bob",
            lambda rule: rule.resource_type is ResourceType.GROUP,
            lambda rule: rule.name == "nothing",
        ],
    )
    bob_topic, bob_group, alice_group = parse_rules(text, "t")[1:]
    assert removed == [[bob_topic, bob_group], [bob_group, alice_group], []]
    assert path.read_text() == (
        "# the rules\nUser:alice topic orders Read allow  # kept comment\n\n"
    )
    assert remove_matching(path, [lambda rule: False]) == [[]]
    assert path.read_text().startswith("# the rules")


def test_a_super_user_is_allowed_every_operation_and_others_are_not(tmp_path: Path) -> None:
    path = tmp_path / "acls.txt"
    path.write_text("User:mallory topic * All deny\n")
    authorizer = load_acls(path, super_users=frozenset({"User:root", "User:mallory"}))
    for operation in Operation:
        for resource in ResourceType:
            assert authorizer.allows("User:root", resource, "x", operation)
            assert authorizer.allows("User:mallory", resource, "x", operation)  # over a deny
            assert not authorizer.allows("User:alice", resource, "x", operation)
    assert authorizer.allows_any("User:root", ResourceType.TOPIC, Operation.WRITE)
    everything = Authorizer([], super_users=frozenset({"User:root"}))
    assert everything.authorized_operations("User:root", ResourceType.TOPIC, "t") == (
        Authorizer([AclRule("User:root", ResourceType.TOPIC, "*", Operation.ALL, True)])
    ).authorized_operations("User:root", ResourceType.TOPIC, "t")


def test_super_users_are_read_as_kafkas_super_users_setting() -> None:
    assert parse_super_users(" User:a ;User:b;; ") == frozenset({"User:a", "User:b"})
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError, match="super user 'alice' must be User:NAME"):
        parse_super_users("User:a;alice")
    with pytest.raises(ValueError, match="would match no one"):
        parse_super_users("User:*")
