"""Kafka's ACL bindings and binding filters (``AclBinding``, ``AclBindingFilter``) over the
rules of the ACL file (``acl``), for CreateAcls, DescribeAcls and DeleteAcls (``admin_acls``).

A binding is what the wire carries: resource type, name and pattern type, principal, host,
operation and permission, each an int code of Kafka's enums (below). A file rule is one of
them exactly:

    wire binding                          file rule
    resource TOPIC/GROUP/CLUSTER/         topic / group / cluster / transactional_id
      TRANSACTIONAL_ID (2-5)
    LITERAL "orders", LITERAL "*"         orders, *      (``*`` alone: every name)
    PREFIXED "copier-"                    copier-*
    host "*"                              (no host field: every rule is host "*")
    operation ALL, READ..IDEMPOTENT_WRITE All, Read .. IdempotentWrite
    permission ALLOW / DENY               allow / deny

``creation_rule`` turns a CreateAcls creation into the rule, refusing (``InvalidAclError``,
answered INVALID_REQUEST per creation) first what Kafka's broker refuses (``AclApis``,
``AclControlManager.validateNewAcl``: a CLUSTER name other than kafka-cluster, an empty name,
ANY or UNKNOWN codes, a MATCH or ANY pattern type), then what the file cannot hold exactly: a
resource type or operation it has no word for (DELEGATION_TOKEN, USER; CREATE_TOKENS,
DESCRIBE_TOKENS, TWO_PHASE_COMMIT), a host other than ``*``, a principal not ``User:NAME``,
a LITERAL name ending in ``*`` (the file would read it back as a prefix), a name or principal
holding whitespace or ``#`` (the file's separators and comment mark). Last, the rule's line
must parse back to the same rule, or it is refused too: nothing is written that would not
read back as the binding asked for.

``filter_of`` reads a DescribeAcls or DeleteAcls filter; ``AclBindingFilter.matches`` is
Kafka's ``AclBindingFilter.matches``: null name, principal or host match any; resource type
ANY any type; pattern type ANY any pattern with exactly that name, MATCH every pattern that
would match the name (the literal name, the literal ``*``, every prefix of it), LITERAL or
PREFIXED only that pattern; operation and permission ANY any, otherwise only the same one (no
implication: a filter for DESCRIBE does not find a READ rule). A filter with an UNKNOWN code
(0, or a code Kafka does not define) is refused (INVALID_REQUEST), as the controller refuses
an unknown filter; one naming a resource type or operation the file has no word for matches
nothing. Pure values and functions; thread-safe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

from txn_wire.acl import (
    CLUSTER_NAME,
    OPERATION_CODES,
    AclFileError,
    AclRule,
    Operation,
    ResourceType,
    parse_rules,
)
from txn_wire.acl_file import format_rule
from txn_wire.codec import Plain

WILDCARD = "*"
"""The literal name of every resource, and the only host the file's rules have."""


class AclResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


RESOURCE_TYPES = {
    ResourceType.TOPIC: AclResourceType.TOPIC,
    ResourceType.GROUP: AclResourceType.GROUP,
    ResourceType.CLUSTER: AclResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID: AclResourceType.TRANSACTIONAL_ID,
}
"""file resource type → Kafka's; DELEGATION_TOKEN and USER have no file word."""

OPERATIONS = {Operation.ALL: AclOperation.ALL} | {
    operation: AclOperation(code) for operation, code in OPERATION_CODES.items()
}
"""file operation → Kafka's; CREATE_TOKENS, DESCRIBE_TOKENS and TWO_PHASE_COMMIT have none."""

_RESOURCE_OF = {code: resource for resource, code in RESOURCE_TYPES.items()}
_OPERATION_OF = {code: operation for operation, code in OPERATIONS.items()}
_Code = TypeVar("_Code", AclResourceType, PatternType, AclOperation, AclPermissionType)


class InvalidAclError(ValueError):
    """A creation or filter this server refuses: Kafka's INVALID_REQUEST (42), the message
    naming the field and value at fault."""


def _decode(kind: type[_Code], code: int) -> _Code:
    """Kafka's ``fromCode``: a code the enum does not define is UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def _named(value: enum.IntEnum, code: int) -> str:
    return f"{value.name} (code {code})" if value.name == "UNKNOWN" else value.name


@dataclass(frozen=True)
class AclBinding:
    """One ACL as the wire carries it (Kafka's ``AclBinding``)."""

    resource_type: AclResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of_rule(cls, rule: AclRule) -> AclBinding:
        """The binding a file rule is: a name ending in ``*`` (other than ``*`` alone) is the
        prefix before it; the host is ``*``."""
        prefixed = rule.name.endswith(WILDCARD) and rule.name != WILDCARD
        return cls(
            RESOURCE_TYPES[rule.resource_type],
            rule.name[:-1] if prefixed else rule.name,
            PatternType.PREFIXED if prefixed else PatternType.LITERAL,
            rule.principal,
            WILDCARD,
            OPERATIONS[rule.operation],
            AclPermissionType.ALLOW if rule.allow else AclPermissionType.DENY,
        )

    def fields(self) -> Plain:
        """The wire fields of a DeleteAcls matching ACL."""
        return {
            "resource_type": int(self.resource_type),
            "resource_name": self.name,
            "pattern_type": int(self.pattern_type),
            **self.entry(),
        }

    def entry(self) -> Plain:
        """The wire fields of the access control entry alone (a DescribeAcls answer lists the
        entries of each resource pattern)."""
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": int(self.operation),
            "permission_type": int(self.permission),
        }


def creation_rule(creation: Plain) -> AclRule:
    """The file rule of a CreateAcls creation; InvalidAclError naming what the server refuses
    or the file cannot hold exactly (module docstring)."""
    binding = _creation_binding(creation)
    _check_as_kafka(binding, creation)
    rule = _representable_rule(binding)
    line = format_rule(rule)
    try:
        read_back = parse_rules(line, "(the creation)")
    except AclFileError as error:
        raise InvalidAclError(f"ACL {line!r} cannot be stored: {error}") from None
    if read_back != [rule]:
        raise InvalidAclError(f"ACL {line!r} would not read back as the binding asked for")
    return rule


def _creation_binding(creation: Plain) -> AclBinding:
    return AclBinding(
        _decode(AclResourceType, creation["resource_type"]),
        creation["resource_name"],
        _decode(PatternType, creation.get("resource_pattern_type", PatternType.LITERAL)),
        creation["principal"],
        creation["host"],
        _decode(AclOperation, creation["operation"]),
        _decode(AclPermissionType, creation["permission_type"]),
    )


def _check_as_kafka(binding: AclBinding, creation: Plain) -> None:
    """What Kafka's broker refuses in a creation, with its messages (``AclApis``,
    ``AclControlManager.validateNewAcl``), in its order."""
    resource = binding.resource_type
    if resource is AclResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not binding.name:
        raise InvalidAclError("Invalid empty resource name")
    if resource in (AclResourceType.UNKNOWN, AclResourceType.ANY):
        raise InvalidAclError(f"Invalid resourceType {_named(resource, creation['resource_type'])}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        code = creation.get("resource_pattern_type", 0)
        raise InvalidAclError(f"Invalid patternType {_named(binding.pattern_type, code)}")
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAclError(
            f"Invalid operation {_named(binding.operation, creation['operation'])}"
        )
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        code = creation["permission_type"]
        raise InvalidAclError(f"Invalid permissionType {_named(binding.permission, code)}")


def _representable_rule(binding: AclBinding) -> AclRule:
    """The file rule of a binding Kafka would accept; InvalidAclError for what the file
    cannot hold exactly."""
    resource = _RESOURCE_OF.get(binding.resource_type)
    if resource is None:
        raise InvalidAclError(
            f"resource type {binding.resource_type.name} is not supported: the ACL file holds "
            "TOPIC, GROUP, CLUSTER and TRANSACTIONAL_ID rules"
        )
    operation = _OPERATION_OF.get(binding.operation)
    if operation is None:
        raise InvalidAclError(
            f"operation {binding.operation.name} is not supported: the ACL file holds ALL, "
            "READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
            "ALTER_CONFIGS and IDEMPOTENT_WRITE"
        )
    if binding.host != WILDCARD:
        raise InvalidAclError(
            f"host {binding.host!r}: host-specific ACLs are not supported (the ACL file has no "
            "host field: every rule applies from every host); give host '*'"
        )
    principal = binding.principal
    if not principal.startswith("User:") or principal == "User:":
        raise InvalidAclError(
            f"principal {principal!r}: the ACL file holds User:NAME principals (and User:*) only"
        )
    _check_field("principal", principal)
    _check_field("resource name", binding.name)
    prefixed = binding.pattern_type is PatternType.PREFIXED
    if not prefixed and binding.name.endswith(WILDCARD) and binding.name != WILDCARD:
        raise InvalidAclError(
            f"resource name {binding.name!r} (LITERAL) ends in '*', which the ACL file writes "
            "for a PREFIXED name: only '*' alone (every name) can be a LITERAL name ending in it"
        )
    name = binding.name + WILDCARD if prefixed else binding.name
    allow = binding.permission is AclPermissionType.ALLOW
    return AclRule(principal, resource, name, operation, allow)


def _check_field(what: str, value: str) -> None:
    # str.split() breaks at every character splitlines() does (\n, \x1c-\x1e, \x85, \u2028..)
    if "#" in value or value.split() != [value]:
        raise InvalidAclError(
            f"{what} {value!r} holds whitespace or '#', which the ACL file (blank-separated "
            "fields, '#' starting a comment) cannot store"
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """A DescribeAcls or DeleteAcls filter (Kafka's ``AclBindingFilter``); None: any."""

    resource_type: AclResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type not in (AclResourceType.ANY, binding.resource_type):
            return False
        exact = self.pattern_type in (PatternType.ANY, binding.pattern_type)
        if not exact and self.pattern_type is not PatternType.MATCH:
            return False
        if self.name is None:
            return True
        if exact:
            return self.name == binding.name
        if binding.pattern_type is PatternType.LITERAL:  # MATCH
            return binding.name in (self.name, WILDCARD)
        return self.name.startswith(binding.name)

    def _matches_entry(self, binding: AclBinding) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``."""
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (AclOperation.ANY, binding.operation)
            and self.permission in (AclPermissionType.ANY, binding.permission)
        )


def filter_of(fields: Plain) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (their field names are the
    same); InvalidAclError for an UNKNOWN code, naming it."""
    return AclBindingFilter(
        _known(AclResourceType, fields["resource_type_filter"], "resource type"),
        fields["resource_name_filter"],
        _known(PatternType, fields.get("pattern_type_filter", PatternType.LITERAL), "pattern type"),
        fields["principal_filter"],
        fields["host_filter"],
        _known(AclOperation, fields["operation"], "operation"),
        _known(AclPermissionType, fields["permission_type"], "permission type"),
    )


def _known(kind: type[_Code], code: int, what: str) -> _Code:
    value = _decode(kind, code)
    if value == 0:
        raise InvalidAclError(f"Unknown filter: {what} {_named(value, code)}")
    return value
