"""CreatePartitions (37): an AdminClient grows a topic (``Log.create_partitions``).

Per topic (v0-v3), as Kafka's ``ControllerApis.createPartitions`` and
``ReplicationControlManager.createPartitions`` answer, the ACL refusal (Alter on the topic,
TOPIC_AUTHORIZATION_FAILED) coming from the rule (``authorize``):

    the same name twice in one request          INVALID_REQUEST (42), once
    topic unknown                               UNKNOWN_TOPIC_OR_PARTITION (3)
    count equal to, or below, the current one   INVALID_PARTITIONS (37), Kafka's words
      (or above the engine's MAX_PARTITIONS)
    assignments not one per new partition, or   INVALID_REPLICA_ASSIGNMENT (39)
      one naming another broker than this one
      (0), a broker twice, or none
    an internal topic                           INVALID_TOPIC_EXCEPTION (17): the engine's
                                                coordinators use partition 0 only (a Kafka
                                                broker would grow it)

``validate_only`` checks all of that and writes nothing. The engine checks the count again
under the log lock, so a peer growing the topic meanwhile makes this one INVALID_PARTITIONS,
never two growths. The partitions exist when the answer goes out, so ``timeout_ms`` is met
and none is waited for; throttle 0. Thread-safe: runs on worker threads.
"""

from __future__ import annotations

from collections import Counter

from txn_log.errors import TxnLogError
from txn_wire.admin_topics import INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, replica_problem
from txn_wire.broker import Broker, error_code
from txn_wire.codec import Plain, Request

CREATE_PARTITIONS = 37


def handle_create_partitions(broker: Broker, request: Request) -> Plain:
    topics = request.body.get("topics") or []
    counts = Counter(topic["name"] for topic in topics)
    validate_only = bool(request.body.get("validate_only", False))
    twice = [
        _result(name, INVALID_REQUEST, f"topic {name!r} appears more than once in the request")
        for name, count in counts.items()
        if count > 1
    ]
    grown = [_grow(broker, t, validate_only) for t in topics if counts[t["name"]] == 1]
    return {"results": twice + grown}


def _grow(broker: Broker, topic: Plain, validate_only: bool) -> Plain:
    name, total = topic["name"], topic["count"]
    try:
        assignments = topic.get("assignments")
        if assignments is not None:
            current = len(broker.log.partitions(name))
            problem = _assignment_problem(assignments, current, total)
            if problem is not None:
                return _result(name, INVALID_REPLICA_ASSIGNMENT, problem)
        broker.log.create_partitions(name, total, validate_only=validate_only)
    except TxnLogError as error:
        return _result(name, error_code(error, CREATE_PARTITIONS), str(error))
    return _result(name, 0, None)


def _assignment_problem(assignments: list[Plain], current: int, total: int) -> str | None:
    """Why the replica assignments of the partitions ``current..total-1`` do not fit this
    broker (None: they do; a count that is no increase is the engine's to refuse)."""
    if total <= current:
        return None
    if len(assignments) != total - current:
        return (
            f"{total - current} partition(s) would be added, but {len(assignments)} "
            f"assignment(s) were given"
        )
    for index, assignment in enumerate(assignments, current):
        problem = replica_problem(index, list(assignment["broker_ids"]))
        if problem is not None:
            return problem
    return None


def _result(name: str, code: int, message: str | None) -> Plain:
    return {"name": name, "error_code": code, "error_message": message}
