"""The ACL rule of AlterConfigs and IncrementalAlterConfigs (R-12), as Kafka's
``ControllerApis.authorizeAlterResource`` applies it: AlterConfigs on the topic for a TOPIC
resource (TOPIC_AUTHORIZATION_FAILED, 29), AlterConfigs on the cluster for a BROKER one
(CLUSTER_AUTHORIZATION_FAILED, 31).

A resource that Kafka's broker refuses as INVALID_REQUEST before it authorizes anything (named
twice, a key twice, a null value, an unknown operation or resource type:
``admin_configs.request_problem``) is left to the handler, which answers it so, whatever the
principal may do. Refused resources never reach the handler (nothing of them is validated or
written) and are added to its answer. Pure; thread-safe.
"""

from __future__ import annotations

from collections import Counter

from txn_wire.acl import CLUSTER_NAME, Operation, ResourceType
from txn_wire.admin_configs import INCREMENTAL_ALTER_CONFIGS, request_problem, resource_key, result
from txn_wire.admin_topics import TOPIC_RESOURCE
from txn_wire.codec import Plain
from txn_wire.guard import (
    CLUSTER_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    Check,
    Guard,
)


def alter_configs(check: Check) -> Guard:
    """AlterConfigs on each TOPIC resource's topic, or on the cluster for a BROKER one."""
    resources = check.body.get("resources") or []
    counts = Counter(resource_key(r) for r in resources)
    incremental = check.request.api_key == INCREMENTAL_ALTER_CONFIGS

    def allowed(resource: Plain) -> bool:
        if request_problem(resource, counts, incremental=incremental) is not None:
            return True  # the handler's INVALID_REQUEST, before any ACL (Kafka's preprocess)
        if resource["resource_type"] == TOPIC_RESOURCE:
            name = resource["resource_name"]
            return check.allows(ResourceType.TOPIC, name, Operation.ALTER_CONFIGS)
        return check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.ALTER_CONFIGS)

    denied = [r for r in resources if not allowed(r)]
    if not denied:
        return Guard(check.request)
    refused = [
        result(
            r,
            TOPIC_AUTHORIZATION_FAILED
            if r["resource_type"] == TOPIC_RESOURCE
            else CLUSTER_AUTHORIZATION_FAILED,
            "not authorized to alter its configs (AlterConfigs)",
        )
        for r in denied
    ]
    if len(denied) == len(resources):
        return check.refuse({"responses": refused})

    def merge(answer: Plain | None) -> Plain | None:
        return None if answer is None else {**answer, "responses": answer["responses"] + refused}

    return check.narrowed(merge, resources=[r for r in resources if allowed(r)])
