"""Transactions and group commits as a hostile client sends them, raw, to a real
``txnlog serve`` (issue 24, defects 2 and 5).

- A transactional batch in a Produce without a transactional id (B-19, KIP-890): before, it
  was appended under any producer id, someone else's included, and the partition's last
  stable offset stayed at it forever (no timeout or ``txnlog transactions abort`` could end a
  transaction the coordinator never knew). Kafka answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
- A transactional batch under a transactional id whose transaction does not include the
  partition, or arriving after its EndTxn: INVALID_TXN_STATE, the LSO never pinned.
- After the cleaner removed an aborted transaction's ABORT marker, a read_committed Kafka
  consumer still gets the newest committed value of a key (B-13, defect 6).
- KIP-447: a zombie copier's TxnOffsetCommit carrying its old generation after a rebalance
  (ILLEGAL_GENERATION) or a member id the group no longer holds (UNKNOWN_MEMBER_ID) commits
  nothing; a plain OffsetCommit without a member into a group with members is
  UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_batches import good_batch
from tests.support import directory_bytes
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient, consume_to

PRODUCE, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, SYNC_GROUP = 0, 2, 8, 9, 11, 14
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28


@pytest.fixture
def client(server: ServeProcess) -> Iterator[RawClient]:
    raw = RawClient(server.port)
    yield raw
    raw.close()


def produce_codes(client: RawClient, parts: list[tuple[int, bytes]], txn: str | None) -> list[int]:
    body = {
        "transactional_id": txn,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [
            {
                "name": "orders",
                "partition_data": [{"index": p, "records": records} for p, records in parts],
            }
        ],
    }
    answer = client.request(PRODUCE, 9, body)
    return [p["error_code"] for p in answer["responses"][0]["partition_responses"]]


def init(client: RawClient, txn: str) -> tuple[int, int]:
    answer = client.request(
        INIT_PRODUCER_ID, 4, {"transactional_id": txn, "transaction_timeout": 60_000}
    )
    assert answer["error_code"] == 0
    return answer["producer_id"], answer["producer_epoch"]


def add_partition(client: RawClient, txn: str, pid: int, epoch: int, partition: int) -> None:
    body = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": "orders", "partitions": [partition]}],
    }
    answer = client.request(ADD_PARTITIONS, 3, body)
    result = answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0]
    assert result["partition_error_code"] == 0


def end_txn(client: RawClient, txn: str, pid: int, epoch: int, commit: bool) -> int:
    body = {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch}
    code: int = client.request(END_TXN, 3, {**body, "committed": commit})["error_code"]
    return code


def txn_batch(pid: int, epoch: int, sequence: int = 0) -> bytes:
    return good_batch(
        [b"txn"], producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True
    )


def stable_and_high(client: RawClient, partition: int) -> tuple[int, int]:
    """(read_committed latest, read_uncommitted latest) = (LSO, high watermark)."""
    ends = []
    for isolation in (1, 0):
        topics = [
            {"name": "orders", "partitions": [{"partition_index": partition, "timestamp": -1}]}
        ]
        body = {"replica_id": -1, "isolation_level": isolation, "topics": topics}
        ends.append(client.request(LIST_OFFSETS, 6, body)["topics"][0]["partitions"][0]["offset"])
    return ends[0], ends[1]


def test_a_transactional_batch_without_a_transactional_id_is_refused_whole_53(
    server: ServeProcess, client: RawClient
) -> None:
    victim = init(client, "victim")
    add_partition(client, "victim", *victim, partition=0)
    before = directory_bytes(server.path, content_only=True)
    stolen = txn_batch(*victim)  # the victim's producer id, in its open transaction
    plain = good_batch([b"plain"])
    assert produce_codes(client, [(0, stolen), (1, plain)], txn=None) == [53, 53]
    unknown = txn_batch(987_654, 0)  # a producer id nobody has
    assert produce_codes(client, [(1, unknown)], txn=None) == [53]
    assert directory_bytes(server.path, content_only=True) == before
    assert stable_and_high(client, 0) == (0, 0) and stable_and_high(client, 1) == (0, 0)
    # the victim's own transaction is untouched
    assert produce_codes(client, [(0, txn_batch(*victim))], txn="victim") == [0]
    assert end_txn(client, "victim", *victim, commit=True) == 0
    assert stable_and_high(client, 0) == (2, 2)  # its record and its COMMIT marker


def test_a_transaction_the_coordinator_does_not_know_never_pins_the_lso_KIP890(
    client: RawClient,
) -> None:
    pid, epoch = init(client, "t")
    # no AddPartitionsToTxn: the coordinator knows no transaction on partition 0
    assert produce_codes(client, [(0, txn_batch(pid, epoch))], txn="t") == [48]
    # a transactional id that names another producer's id: fenced
    assert produce_codes(client, [(0, txn_batch(pid + 1, epoch))], txn="t") in ([90], [47])
    add_partition(client, "t", pid, epoch, partition=0)
    assert produce_codes(client, [(0, txn_batch(pid, epoch))], txn="t") == [0]
    assert end_txn(client, "t", pid, epoch, commit=True) == 0
    # a produce delayed past EndTxn (same producer, same epoch): no hanging transaction
    assert produce_codes(client, [(0, txn_batch(pid, epoch, sequence=1))], txn="t") == [48]
    assert stable_and_high(client, 0) == (2, 2)


# --- KIP-447 ------------------------------------------------------------------------------------


def join(client: RawClient, member_id: str = "") -> dict[str, Any]:
    body = {
        "group_id": "copiers",
        "session_timeout": 30_000,
        "rebalance_timeout": 30_000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    answer = client.request(JOIN_GROUP, 5, body)
    if answer["error_code"] == 79:  # MEMBER_ID_REQUIRED (KIP-394): join again with the id
        answer = client.request(JOIN_GROUP, 5, {**body, "member_id": answer["member_id"]})
    assert answer["error_code"] == 0, answer
    return answer


def describe_state(client: RawClient) -> str:
    state: str = client.request(15, 4, {"groups": ["copiers"]})["groups"][0]["group_state"]
    return state


def txn_commit_code(client: RawClient, txn: tuple[int, int], member: str, generation: int) -> int:
    body = {
        "transactional_id": "copier",
        "group_id": "copiers",
        "producer_id": txn[0],
        "producer_epoch": txn[1],
        "generation_id": generation,
        "member_id": member,
        "group_instance_id": None,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 42}]}
        ],
    }
    answer = client.request(TXN_OFFSET_COMMIT, 3, body)
    code: int = answer["topics"][0]["partitions"][0]["error_code"]
    return code


def committed_offset(client: RawClient) -> int:
    topics = [{"name": "orders", "partition_indexes": [0]}]
    answer = client.request(OFFSET_FETCH, 7, {"group_id": "copiers", "topics": topics})
    offset: int = answer["topics"][0]["partitions"][0]["committed_offset"]
    return offset


def test_a_zombie_copiers_txn_offset_commit_is_fenced_by_its_generation_KIP447(
    server: ServeProcess, client: RawClient
) -> None:
    first = join(client)  # generation 1: the copier alone
    zombie_id, old_generation = first["member_id"], first["generation_id"]
    sync = {"group_id": "copiers", "generation_id": old_generation, "member_id": zombie_id}
    assert client.request(SYNC_GROUP, 3, {**sync, "assignments": []})["error_code"] == 0
    # another copier joins; the first rejoins too (generation 2): a rebalance happened
    other = RawClient(server.port)
    joined: list[dict[str, Any]] = []
    newcomer = threading.Thread(target=lambda: joined.append(join(other)))
    newcomer.start()
    waited = 0
    while describe_state(client) != "PreparingRebalance":  # the newcomer opened a round
        waited += 1
        assert waited < 600, "the newcomer's JoinGroup never opened a rebalance"
        time.sleep(0.05)
    rejoined = join(client, zombie_id)
    newcomer.join(60)
    generation = rejoined["generation_id"]
    assert generation == old_generation + 1 and joined

    txn = init(client, "copier")
    client.request(
        ADD_OFFSETS,
        3,
        {"transactional_id": "copier", "producer_id": txn[0], "producer_epoch": txn[1],
         "group_id": "copiers"},
    )  # fmt: skip
    before = directory_bytes(server.path, content_only=True)
    assert txn_commit_code(client, txn, zombie_id, old_generation) == 22  # ILLEGAL_GENERATION
    assert txn_commit_code(client, txn, "gone-member", generation) == 25  # UNKNOWN_MEMBER_ID
    assert directory_bytes(server.path, content_only=True) == before  # nothing written
    # an old client's commit names no member: allowed, as Kafka allows it
    assert txn_commit_code(client, txn, "", -1) == 0
    assert txn_commit_code(client, txn, zombie_id, generation) == 0  # the current member
    assert end_txn(client, "copier", *txn, commit=True) == 0
    assert committed_offset(client) == 42
    other.close()


def test_a_plain_commit_without_a_member_into_a_live_group_is_UNKNOWN_MEMBER_ID(
    server: ServeProcess, client: RawClient
) -> None:
    member = join(client)
    sync = {"group_id": "copiers", "generation_id": member["generation_id"]}
    sync["member_id"] = member["member_id"]
    assert client.request(SYNC_GROUP, 3, {**sync, "assignments": []})["error_code"] == 0
    body = {
        "group_id": "copiers",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 7}]}
        ],
    }
    before = directory_bytes(server.path, content_only=True)
    answer = client.request(OFFSET_COMMIT, 8, body)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 25
    assert directory_bytes(server.path, content_only=True) == before
    current = {**body, "generation_id_or_member_epoch": member["generation_id"]}
    current["member_id"] = member["member_id"]
    answer = client.request(OFFSET_COMMIT, 8, current)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0
    assert committed_offset(client) == 7


# --- read_committed after cleaning (defect 6) ---------------------------------------------------


def test_a_kafka_consumer_gets_the_newest_committed_value_after_cleaning_B13(
    tmp_path: Path,
) -> None:
    """k=v1 committed, k=v2 aborted, k=v3 committed by one transactional producer on a
    compacted topic; cleaned past delete.retention.ms, so the ABORT marker is gone. A
    read_committed confluent-kafka consumer must see v3, as the engine's own read does; before,
    Fetch still listed the aborted transaction and librdkafka dropped v3 waiting for a marker
    that no longer existed."""
    from tests.txn_wire.wire_clients import confluent_consumer
    from txn_log.log import Log
    from txn_log.storage.log_cleaner import clean_partition
    from txn_log.topic_partition import TopicPartition

    path = tmp_path / "log"
    tp = TopicPartition("keyed", 0)
    config = {"cleanup.policy": "compact", "segment.bytes": "200", "delete.retention.ms": "0"}
    with Log.open(path) as log:
        log.create_topic("keyed", 1, config)
        producer = log.producer(transactional_id="writer")
        producer.init_transactions()
        for value, commit in [(b"v1", True), (b"v2", False), (b"v3", True)]:
            producer.begin_transaction()
            producer.send("keyed", value, key=b"k", partition=0)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
        plain = log.producer()
        plain.send("keyed", b"x", key=b"other", partition=0)
        plain.flush()
        log.partition_log(tp).roll()
        time.sleep(0.05)  # past delete.retention.ms (0) on the wall clock the cleaner reads
        clean_partition(log.partition_log(tp), int(time.time() * 1000), force=True)
        engine_view = {r.key: r.value for r in log.consumer().read(tp, 0)}
        end = log.partition_reader(tp).last_stable_offset
    assert engine_view[b"k"] == b"v3"
    served = start_serve(path)
    consumer = confluent_consumer(served.bootstrap, "read_committed")
    try:
        got = consume_to(consumer, "keyed", {0: end})
    finally:
        consumer.close()
        served.stop()
    kafka_view = {}
    for _, offset, value in got:
        kafka_view[offset] = value
    assert b"v3" in kafka_view.values(), f"the Kafka client delivered {got}"
