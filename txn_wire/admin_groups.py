"""DeleteGroups (42, v0-2): the engine's group deletion, answered as Kafka's group coordinator
answers it.

Each group named is deleted by ``GroupOffsetStore.delete_group``: its committed offsets get
tombstones in ``__consumer_offsets`` while the group is held inactive across every process
(``txn_log.group.group_activity``), so a group with members, here or in another ``txnlog
serve`` over the same directory, is GROUP_NOT_EMPTY (68), and a group that holds no committed
offsets GROUP_ID_NOT_FOUND (69); an empty or oversized id is INVALID_GROUP_ID (24). A group
named twice is answered once per name, as Kafka does (the second finds it gone). Runs on a
worker thread (the engine appends and fsyncs); the ACL rule (Delete on each group) is in
``authorize_groups``.
"""

from __future__ import annotations

from txn_log.errors import TxnLogError
from txn_wire.broker import Broker, error_code
from txn_wire.codec import Plain, Request

DELETE_GROUPS = 42


def handle_delete_groups(broker: Broker, request: Request) -> Plain:
    results = []
    for group_id in request.body["groups_names"]:
        try:
            broker.log.group_offsets.delete_group(group_id)
            code = 0
        except TxnLogError as error:
            code = error_code(error, DELETE_GROUPS, request.api_version)
        results.append({"group_id": group_id, "error_code": code})
    return {"results": results}
