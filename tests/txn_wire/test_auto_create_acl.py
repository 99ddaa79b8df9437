"""Auto-creation asks for Create (Kafka's ``handleTopicMetadataRequest``): with ACLs, a topic
that does not exist is created by a Metadata request or a produce only for a principal with
Create on the cluster or on that topic; Describe (or Write) alone gets
TOPIC_AUTHORIZATION_FAILED (Metadata) or UNKNOWN_TOPIC_OR_PARTITION (Produce), and no topic.
Before: a principal allowed only to describe or write created any topic it named."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.txn_wire.auth_clients import write_acls
from tests.txn_wire.serve_process import start_serve
from tests.txn_wire.test_protocol_edges import batch, produce
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log

METADATA = 3
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION = 29, 3


def _metadata(raw: RawClient, name: str) -> int:
    answer = raw.request(
        METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True}
    )
    return int(answer["topics"][0]["error_code"])


def test_auto_creation_needs_create_on_the_cluster_or_the_topic(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with Log.open(log_dir) as log:
        log.create_topic("orders", 1)
    acls = write_acls(
        tmp_path / "acls.txt",
        [
            "User:ANONYMOUS topic * Describe allow",
            "User:ANONYMOUS topic * Write allow",
            "User:ANONYMOUS topic made-* Create allow",
        ],
    )
    served = start_serve(log_dir, "--acl-file", str(acls), "--auto-create-topics")
    raw = RawClient(served.port)
    try:
        assert _metadata(raw, "uninvited") == TOPIC_AUTHORIZATION_FAILED
        written = produce(raw, batch([b"x"]), topic="uninvited-too")
        assert written["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, written
        assert _metadata(raw, "made-by-metadata") == 0
        assert produce(raw, batch([b"x"]), topic="made-by-produce")["error_code"] == 0
        assert _metadata(raw, "orders") == 0  # an existing topic needs no Create
    finally:
        raw.close()
        served.stop()
    with Log.open(log_dir) as log:
        assert sorted(log.topics()) == ["made-by-metadata", "made-by-produce", "orders"]


def test_create_on_the_cluster_allows_any_auto_created_topic(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    acls = write_acls(
        tmp_path / "acls.txt",
        [
            "User:ANONYMOUS topic * Describe allow",
            "User:ANONYMOUS cluster kafka-cluster Create allow",
        ],
    )
    served = start_serve(log_dir, "--acl-file", str(acls), "--auto-create-topics")
    raw = RawClient(served.port)
    try:
        assert _metadata(raw, "anything") == 0
    finally:
        raw.close()
        served.stop()
    with Log.open(log_dir) as log:
        assert log.topics() == ["anything"]


def test_a_null_topic_name_under_a_prefixed_rule_is_answered(tmp_path: Path) -> None:
    """Metadata v10+ may name a topic null (by id): under a prefixed ACL rule it is refused
    like any topic the principal may not describe, and the connection stays up. Before: the
    rule's prefix match raised on None and the server closed the connection."""
    acls = write_acls(tmp_path / "acls.txt", ["User:ANONYMOUS topic ord* Describe allow"])
    served = start_serve(tmp_path / "log", "--acl-file", str(acls))
    raw = RawClient(served.port)
    try:
        answer = raw.request(
            METADATA,
            12,
            {
                "topics": [{"name": None, "topic_id": uuid.uuid4()}],
                "allow_auto_topic_creation": False,
            },
        )
        assert answer["topics"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED, answer
        assert (
            raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})[
                "error_code"
            ]
            == 0
        )  # still connected
    finally:
        raw.close()
        served.stop()
