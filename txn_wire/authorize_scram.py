"""The ACL rules of DescribeUserScramCredentials and AlterUserScramCredentials (R-12), as
Kafka's ``KafkaApis`` applies them: Describe on the cluster for a describe, Alter on the
cluster for an alteration (Alter implies Describe). A refusal is the whole request's: the
handler never runs, so a refused alteration writes nothing. Pure; thread-safe.

An alteration is refused as Kafka's ``getErrorResponse`` answers it: CLUSTER_AUTHORIZATION_FAILED
(31) for each distinct user, by name. A describe is refused with 31 for each user it names, by
name, but not at the top of the response, where Kafka also puts it: librdkafka (2.15, 2.16:
``rd_kafka_DescribeUserScramCredentialsResponse_parse``) keeps a request-level error's message
in a string on its stack (or a static one) and frees it with the result, which aborts the
client process (confluent-kafka, kcat, every librdkafka binding); per user, the same refusal
reaches every client. A describe of every user (none named) is answered with no users: those
a principal without Describe on the cluster may see (Kafka would fail on the null list).
"""

from __future__ import annotations

from txn_wire.acl import CLUSTER_NAME, Operation, ResourceType
from txn_wire.codec import Plain
from txn_wire.guard import CLUSTER_AUTHORIZATION_FAILED, Check, Guard

_MESSAGE = "Cluster authorization failed."  # Kafka's message for the error


def describe_user_scram_credentials(check: Check) -> Guard:
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE):
        return Guard(check.request)
    users = [user["name"] for user in check.body.get("users") or []]
    refused = [{**_refused(user), "credential_infos": []} for user in dict.fromkeys(users)]
    return check.refuse({"error_code": 0, "error_message": None, "results": refused})


def alter_user_scram_credentials(check: Check) -> Guard:
    if check.allows(ResourceType.CLUSTER, CLUSTER_NAME, Operation.ALTER):
        return Guard(check.request)
    named = [*(check.body.get("deletions") or []), *(check.body.get("upsertions") or [])]
    users = sorted({alteration["name"] for alteration in named})
    return check.refuse({"results": [_refused(user) for user in users]})


def _refused(user: str) -> Plain:
    return {"user": user, "error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": _MESSAGE}
