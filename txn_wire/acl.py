"""ACLs of ``txnlog serve --acl-file`` (R-12, C-31, B-19): who may do what to which resource.

The ACL file has one rule a line, five fields separated by blanks; ``#`` starts a comment::

    # principal    resource type      name        operation  permission
    User:alice     topic              orders      Write      allow
    User:alice     transactional_id   copier-*    Write      allow
    User:*         group              *           Read       allow
    User:mallory   topic              *           All        deny

- principal: ``User:NAME`` (the SASL user; ``User:ANONYMOUS`` on a PLAINTEXT listener) or
  ``User:*`` for everyone.
- resource type: ``topic``, ``group``, ``transactional_id`` (Kafka's ProducerTransactionalId,
  C-31) or ``cluster`` (name ``kafka-cluster``; IdempotentWrite there lets a producer without
  a transactional id get a producer id, as in Kafka).
- name: a literal name, a prefix ending in ``*`` (``copier-*``), or ``*`` for every name.
- operation: ``Read``, ``Write``, ``Describe`` (on the cluster: DescribeUserScramCredentials),
  ``IdempotentWrite``, ``Create`` (on a topic or the cluster: CreateTopics), ``Delete`` (on a
  topic or the cluster: DeleteTopics; on a group: DeleteGroups), ``Alter`` (on a topic:
  CreatePartitions; on the cluster: AlterUserScramCredentials), ``DescribeConfigs``,
  ``AlterConfigs``, ``ClusterAction`` or ``All``. ClusterAction guards no API served here;
  it only shows in the operations Metadata reports a principal may perform.
- permission: ``allow`` or ``deny``.

Decisions are Kafka's (``StandardAuthorizer``): a matching deny wins over any allow; without a
matching allow the answer is no (allow.everyone.if.no.acl.found=false); an allowed Read,
Write, Delete or Alter implies Describe, an allowed AlterConfigs implies DescribeConfigs; All
matches every operation. ``authorized_operations`` is the bit field Metadata v8+ answers
(Kafka's ``AclOperation`` codes). A super user (``txnlog serve --super-users``, Kafka's
``super.users``) is allowed every operation on every resource whatever the rules say, as
``StandardAuthorizer`` allows them. Immutable once loaded; thread-safe. The server re-reads
the file when it changes (``watched_file``); ``txnlog acls``, CreateAcls and DeleteAcls edit
it (``acl_file``, ``admin_acls``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


class ResourceType(enum.Enum):
    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional_id"
    CLUSTER = "cluster"


class Operation(enum.Enum):
    """An ACL operation, by its name in the ACL file (Kafka's ``AclOperation``)."""

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    ALL = "All"


OPERATION_CODES = {
    Operation.READ: 3,
    Operation.WRITE: 4,
    Operation.CREATE: 5,
    Operation.DELETE: 6,
    Operation.ALTER: 7,
    Operation.DESCRIBE: 8,
    Operation.CLUSTER_ACTION: 9,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
    Operation.IDEMPOTENT_WRITE: 12,
}
"""Kafka's ``AclOperation`` code of each operation: its bit in an authorized-operations field."""

SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
}
"""The operations Kafka reports on a resource type (``AclEntry.supportedOperations``), whether
or not this server serves an API they guard: authorized operations are a subset of these."""

_IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS},
}
"""operation → the operations whose allow rules allow it too (Kafka's IMPLIES_DESCRIBE and
IMPLIES_DESCRIBE_CONFIGS); a deny rule denies only its own operation."""


def operations_bit_field(operations: Iterable[Operation]) -> int:
    """Kafka's 32-bit field of ``operations`` (bit n set for AclOperation code n)."""
    return sum(1 << OPERATION_CODES[operation] for operation in set(operations))


class AclFileError(ValueError):
    """The ACL file cannot be read: the message names the file, the line and the field."""


@dataclass(frozen=True)
class AclRule:
    """One line of the ACL file."""

    principal: str
    resource_type: ResourceType
    name: str
    operation: Operation
    allow: bool

    def matches_principal(self, principal: str) -> bool:
        return self.principal in ("User:*", principal)

    def matches_name(self, name: str | None) -> bool:
        if self.name == "*":
            return True
        if name is None:  # a null name (Metadata v10+ may send one): only the wildcard's
            return False
        if self.name.endswith("*"):
            return name.startswith(self.name[:-1])
        return name == self.name

    def matches_operation(self, operation: Operation) -> bool:
        if self.operation in (Operation.ALL, operation):
            return True
        # an allowed Read also allows Describe; a denied one does not deny Describe
        return self.allow and self.operation in _IMPLIED_BY.get(operation, ())


class Authorizer:
    """Answers "may ``principal`` do ``operation`` on this resource?" from a list of rules and
    the super users (principals allowed everything, none by default)."""

    def __init__(self, rules: list[AclRule], super_users: frozenset[str] = frozenset()) -> None:
        self.rules = tuple(rules)
        self.super_users = super_users

    def allows(
        self, principal: str, resource_type: ResourceType, name: str, operation: Operation
    ) -> bool:
        if principal in self.super_users:
            return True
        allowed = False
        for rule in self.rules:
            if (
                rule.resource_type is resource_type
                and rule.matches_principal(principal)
                and rule.matches_name(name)
                and rule.matches_operation(operation)
            ):
                if not rule.allow:
                    return False
                allowed = True
        return allowed

    def authorized_operations(self, principal: str, resource_type: ResourceType, name: str) -> int:
        """The bit field of the operations of ``SUPPORTED_OPERATIONS`` the principal may do on
        this resource (Kafka's ``AuthHelper.authorizedOperations``)."""
        return operations_bit_field(
            operation
            for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.allows(principal, resource_type, name, operation)
        )

    def allows_any(self, principal: str, resource_type: ResourceType, operation: Operation) -> bool:
        """Whether some allow rule gives ``operation`` on some resource of the type and no
        deny takes every such resource away (Kafka's ``authorizeByResourceType``)."""
        if principal in self.super_users:
            return True
        relevant = [
            r
            for r in self.rules
            if r.resource_type is resource_type
            and r.matches_principal(principal)
            and r.matches_operation(operation)
        ]
        if any(not r.allow and r.name == "*" for r in relevant):
            return False
        return any(r.allow for r in relevant)


def load_acls(path: Path, super_users: frozenset[str] = frozenset()) -> Authorizer:
    """Read an ACL file (format in the module docstring); AclFileError if a line is wrong."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise AclFileError(f"ACL file {path}: {error}") from error
    return Authorizer(parse_rules(text, str(path)), super_users)


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users`` value: principals separated by ``;`` (blanks around each are
    dropped, empty entries ignored); ValueError naming one that is not ``User:NAME``."""
    principals = frozenset(p.strip() for p in text.split(";") if p.strip())
    for principal in sorted(principals):
        if not principal.startswith("User:") or principal == "User:":
            raise ValueError(f"super user {principal!r} must be User:NAME")
        if principal == "User:*":  # Kafka compares super users by equality: no wildcard
            raise ValueError(
                "super user 'User:*' would match no one (super users are principals, not "
                "patterns): to allow everyone, add the rule 'User:* <type> * All allow'"
            )
    return principals


def parse_rules(text: str, source: str) -> list[AclRule]:
    """The rules of an ACL file's ``text`` (``source`` names it in errors)."""
    rules = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if fields:
            rules.append(_rule(f"ACL file {source}, line {number}", fields))
    return rules


def _rule(where: str, fields: list[str]) -> AclRule:
    if len(fields) != 5:
        raise AclFileError(
            f"{where}: expected 5 fields (principal, resource type, name, operation, "
            f"permission), got {len(fields)}"
        )
    principal, resource, name, operation, permission = fields
    if not principal.startswith("User:") or principal == "User:":
        raise AclFileError(f"{where}: principal {principal!r} must be User:NAME or User:*")
    types = [t.value for t in ResourceType]
    if resource.lower() not in types:
        raise AclFileError(f"{where}: resource type {resource!r} is not one of {types}")
    operations = {o.value.lower(): o for o in Operation}
    if operation.lower() not in operations:
        raise AclFileError(
            f"{where}: operation {operation!r} is not one of {[o.value for o in Operation]}"
        )
    if permission.lower() not in ("allow", "deny"):
        raise AclFileError(f"{where}: permission {permission!r} must be allow or deny")
    return AclRule(
        principal,
        ResourceType(resource.lower()),
        name,
        operations[operation.lower()],
        permission.lower() == "allow",
    )
