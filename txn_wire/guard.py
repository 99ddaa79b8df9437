"""What authorizing one request gives the server (``Guard``), and the helpers the per-API
rules share (``authorize``, ``authorize_groups``): narrowing a request to the topics a
principal may use, and answering the others with TOPIC_AUTHORIZATION_FAILED.

A rule either refuses the whole request (its answer is then the whole response and the
handler never runs), or narrows it to the allowed parts and says how to merge the refused
parts into the handler's answer, or hands the handler a ``TopicAccess``: the principal's
decisions on topics the request names only by id, or whose refusal depends on whether the
topic exists (DeleteTopics), applied by the handler once it knows the topics, at the point
Kafka applies them. Pure functions of the request; thread-safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txn_wire.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from txn_wire.codec import Plain, Request

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55

Merge = Callable[[Plain | None], Plain | None]


def _unchanged(answer: Plain | None) -> Plain | None:
    return answer


@dataclass(frozen=True)
class Guard:
    """The outcome of authorizing one request: ``refused`` (then ``answer`` is the whole
    response, None for a Produce with acks=0), or the ``request`` to hand to the handler and
    how to ``merge`` the refused parts into its answer."""

    request: Request
    refused: bool = False
    answer: Plain | None = None
    merge: Merge = _unchanged


class Check:
    """One request's checks for one principal."""

    def __init__(self, authorizer: Authorizer, principal: str, request: Request) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.request = request
        self.body = request.body

    def allows(self, resource: ResourceType, name: str, operation: Operation) -> bool:
        return self.authorizer.allows(self.principal, resource, name, operation)

    def refuse(self, answer: Plain | None) -> Guard:
        return Guard(self.request, refused=True, answer=answer)

    def narrowed(self, merge: Merge, **body: Any) -> Guard:
        request = dataclasses.replace(self.request, body={**self.body, **body})
        return Guard(request, merge=merge)


TOPIC_ACCESS = "_topic_access"
"""The request-body key of a rule's ``TopicAccess`` (no Kafka field starts with ``_``)."""


@dataclass(frozen=True)
class TopicAccess:
    """Whether the principal may describe a topic, and do the request's ``operation`` to it.
    Without ACLs (``check`` None) both are always yes."""

    operation: Operation
    check: Check | None = None

    def describes(self, name: str) -> bool:
        return self.check is None or self.check.allows(ResourceType.TOPIC, name, Operation.DESCRIBE)

    def allows(self, name: str) -> bool:
        return self.check is None or self.check.allows(ResourceType.TOPIC, name, self.operation)

    def creates(self, name: str) -> bool:
        """Whether the principal may have ``name`` auto-created: Create on the cluster or on
        the topic, as Kafka's ``handleTopicMetadataRequest`` asks before auto-creating."""
        return self.check is None or any(
            self.check.allows(resource, resource_name, Operation.CREATE)
            for resource, resource_name in (
                (ResourceType.CLUSTER, CLUSTER_NAME),
                (ResourceType.TOPIC, name),
            )
        )

    def handed_to(self, check: Check) -> Check:
        """``check`` with this access in its request's body, for the handler
        (``topic_access``)."""
        body = {**check.body, TOPIC_ACCESS: self}
        return Check(
            check.authorizer, check.principal, dataclasses.replace(check.request, body=body)
        )


def topic_access(request: Request, operation: Operation) -> TopicAccess:
    """The ``TopicAccess`` a rule handed this request's handler (everything allowed: none)."""
    access = request.body.get(TOPIC_ACCESS)
    return access if isinstance(access, TopicAccess) else TopicAccess(operation)


def split_topics(
    check: Check, topics: list[Plain], name_key: str, operation: Operation
) -> tuple[list[Plain], list[Plain]]:
    allowed = [t for t in topics if check.allows(ResourceType.TOPIC, t[name_key], operation)]
    return allowed, [
        t for t in topics if not check.allows(ResourceType.TOPIC, t[name_key], operation)
    ]


def topic_rule(
    check: Check,
    *,
    topics_key: str,
    name_key: str,
    operation: Operation,
    answer_key: str,
    refusal: Callable[[Plain], Plain],
    empty: Plain | None,
) -> Guard:
    """Narrow the request to the topics allowed; each refused topic answered by ``refusal``."""
    allowed, denied = split_topics(check, check.body[topics_key] or [], name_key, operation)
    if not denied:
        return Guard(check.request)
    refused = [refusal(t) for t in denied]
    if not allowed and empty is not None:
        return check.refuse({**empty, answer_key: refused})

    def merge(answer: Plain | None) -> Plain | None:
        if answer is None:
            return None
        return {**answer, answer_key: list(answer[answer_key]) + refused}

    return check.narrowed(merge, **{topics_key: allowed})


def only_described(check: Check, answer: Plain | None) -> Plain | None:
    if answer is None:
        return None
    kept = [
        t
        for t in answer["topics"]
        if check.allows(ResourceType.TOPIC, t["name"], Operation.DESCRIBE)
    ]
    return {**answer, "topics": kept}
