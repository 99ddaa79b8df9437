"""An AdminClient process for ``test_acl_admin_wire``'s concurrency test.

``python -m tests.txn_wire.acl_admin_workers BOOTSTRAP WORKER COUNT``: creates the ACLs
``User:w<WORKER> topic t<WORKER>-<i> Read allow`` for i in 0..COUNT-1, one CreateAcls request
each, then deletes those of odd i, one DeleteAcls request each (a LITERAL filter naming the
topic and the principal), and prints one JSON line: ``{"created": [error or null per i],
"deleted": [[the bindings each delete answered, as lists], ...]}``.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT_S = 60


def binding_row(binding: AclBinding) -> list[object]:
    return [
        binding.restype.name,
        binding.name,
        binding.resource_pattern_type.name,
        binding.principal,
        binding.host,
        binding.operation.name,
        binding.permission_type.name,
    ]


def main(bootstrap: str, worker: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    principal = f"User:w{worker}"
    created: list[str | None] = []
    for i in range(count):
        binding = AclBinding(
            ResourceType.TOPIC,
            f"t{worker}-{i}",
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        future = admin.create_acls([binding], request_timeout=TIMEOUT_S)[binding]
        try:
            future.result(timeout=TIMEOUT_S)
            created.append(None)
        except Exception as error:  # reported to the test, which fails on it
            created.append(repr(error))
    deleted = []
    for i in range(1, count, 2):
        acl_filter = AclBindingFilter(
            ResourceType.TOPIC,
            f"t{worker}-{i}",
            ResourcePatternType.LITERAL,
            principal,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        result = admin.delete_acls([acl_filter], request_timeout=TIMEOUT_S)[acl_filter]
        deleted.append([binding_row(b) for b in result.result(timeout=TIMEOUT_S)])
    print(json.dumps({"created": created, "deleted": deleted}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
