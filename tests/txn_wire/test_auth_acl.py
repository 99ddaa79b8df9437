"""The authorization table (issue 15 item 4; R-12: C-31, B-19): every RPC sent raw to a real
``txnlog serve --users-file --acl-file`` by a user holding all the ACLs it needs, and by users
each missing exactly one of them; the exact error code of each refusal, and nothing written
to the log by a refused request."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.support import directory_bytes
from tests.txn_wire.auth_clients import plain_login, sasl_config, write_acls, write_users
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient, confluent_producer, produce_all
from txn_log.log import Log
from txn_log.record.codec import encode_records
from txn_log.topic_partition import TopicPartition
from txn_wire.acl import AclRule, Authorizer, Operation, ResourceType

NOW = 1_700_000_000_000
GRANTS = {
    "alice": [
        "topic orders Read",
        "topic orders Write",
        "group g-* Read",
        "transactional_id t-* Write",
    ],
    "no_topic_write": ["topic orders Read", "group g-* Read", "transactional_id t-* Write"],
    "no_topic_read": ["topic orders Write", "group g-* Read", "transactional_id t-* Write"],
    "no_topic": ["group g-* Read", "transactional_id t-* Write"],
    "no_group": ["topic orders Read", "topic orders Write", "transactional_id t-* Write"],
    "no_txn": ["topic orders Read", "topic orders Write", "group g-* Read"],
    "cluster_only": ["cluster kafka-cluster IdempotentWrite"],
}
"""user → the ACLs they hold; each user but alice lacks one kind."""


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("acl")
    with Log.open(root / "log") as log:
        log.create_topic("orders", 1)
    users = write_users(root / "users.json", {user: f"pw-{user}" for user in GRANTS})
    lines = [f"User:{user} {grant} allow" for user, grants in GRANTS.items() for grant in grants]
    acls = write_acls(root / "acls.txt", lines)
    served = start_serve(root / "log", "--users-file", str(users), "--acl-file", str(acls))
    try:
        yield served
    finally:
        served.stop()


class Ctx:
    """One case's names (``t-CASE``, ``g-CASE``) and an allowed client for its setup."""

    def __init__(self, admin: RawClient, name: str) -> None:
        self.admin = admin
        self.txn = f"t-{name}"
        self.group = f"g-{name}"
        self.pid = -1
        self.epoch = -1
        self.member_id = ""
        self.generation = -1

    def init(self) -> Ctx:
        answer = self.admin.request(
            22, 4, {"transactional_id": self.txn, "transaction_timeout": 60_000}
        )
        assert answer["error_code"] == 0
        self.pid, self.epoch = answer["producer_id"], answer["producer_epoch"]
        return self

    def add_partition(self) -> Ctx:
        assert add_partitions(self.admin, self) == 0
        return self

    def add_offsets(self) -> Ctx:
        assert add_offsets(self.admin, self) == 0
        return self

    def member(self) -> Ctx:
        self.member_id, self.generation = join_and_sync(self.admin, self)
        return self


def add_partitions(client: RawClient, ctx: Ctx) -> int:
    body = {
        "v3_and_below_transactional_id": ctx.txn,
        "v3_and_below_producer_id": ctx.pid,
        "v3_and_below_producer_epoch": ctx.epoch,
        "v3_and_below_topics": [{"name": "orders", "partitions": [0]}],
    }
    answer = client.request(24, 3, body)
    code: int = answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
        "partition_error_code"
    ]
    return code


def add_offsets(client: RawClient, ctx: Ctx) -> int:
    body = {
        "transactional_id": ctx.txn,
        "producer_id": ctx.pid,
        "producer_epoch": ctx.epoch,
        "group_id": ctx.group,
    }
    code: int = client.request(25, 3, body)["error_code"]
    return code


def produce(client: RawClient, ctx: Ctx, *, transactional: bool) -> int:
    options: dict[str, Any] = {}
    if transactional:
        options = {"producer_id": ctx.pid, "producer_epoch": ctx.epoch, "base_sequence": 0}
    records = encode_records(
        [(None, b"v", NOW, ())], now_ms=NOW, transactional=transactional, **options
    )
    body = {
        "transactional_id": ctx.txn if transactional else None,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": records}]}],
    }
    code: int = client.request(0, 9, body)["responses"][0]["partition_responses"][0]["error_code"]
    return code


def produce_transactional_without_id(client: RawClient, ctx: Ctx) -> int:
    """A transactional batch under the case's producer id (in its open transaction), sent
    without a transactional id: Write on the transactional id cannot be checked, so Kafka
    refuses the request whole (B-19, KIP-890)."""
    records = encode_records(
        [(None, b"v", NOW, ())],
        now_ms=NOW,
        transactional=True,
        producer_id=ctx.pid,
        producer_epoch=ctx.epoch,
        base_sequence=0,
    )
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": records}]}],
    }
    code: int = client.request(0, 9, body)["responses"][0]["partition_responses"][0]["error_code"]
    return code


def join_and_sync(client: RawClient, ctx: Ctx) -> tuple[str, int]:
    """Make the case's group hold one member (alice's), at a generation > 1: returns its id
    and the group's current generation."""
    body = {
        "group_id": ctx.group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    member_id = client.request(11, 5, body)["member_id"]
    for _ in range(2):  # join twice: generation 2, so that generation 1 is a stale one
        joined = client.request(11, 5, {**body, "member_id": member_id})
        assert joined["error_code"] == 0, joined
        sync = {"group_id": ctx.group, "member_id": member_id, "assignments": []}
        client.request(14, 3, {**sync, "generation_id": joined["generation_id"]})
    return member_id, joined["generation_id"]


def txn_offset_commit_stale_generation(client: RawClient, ctx: Ctx) -> int:
    """A zombie's TxnOffsetCommit: the group's member, one generation behind (KIP-447)."""
    body = {
        "transactional_id": ctx.txn,
        "group_id": ctx.group,
        "producer_id": ctx.pid,
        "producer_epoch": ctx.epoch,
        "generation_id": ctx.generation - 1,
        "member_id": ctx.member_id,
        "topics": offsets_topics(),
    }
    code: int = client.request(28, 3, body)["topics"][0]["partitions"][0]["error_code"]
    return code


def fetch(client: RawClient, ctx: Ctx) -> int:
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    body = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1}
    body["topics"] = [{"topic": "orders", "partitions": [partition]}]
    code: int = client.request(1, 12, body)["responses"][0]["partitions"][0]["error_code"]
    return code


def list_offsets(client: RawClient, ctx: Ctx) -> int:
    topics = [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]
    answer = client.request(2, 6, {"replica_id": -1, "isolation_level": 1, "topics": topics})
    code: int = answer["topics"][0]["partitions"][0]["error_code"]
    return code


def metadata(client: RawClient, ctx: Ctx) -> int:
    code: int = client.request(3, 9, {"topics": [{"name": "orders"}]})["topics"][0]["error_code"]
    return code


def offsets_topics() -> list[dict[str, Any]]:
    return [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]


def offset_commit(client: RawClient, ctx: Ctx) -> int:
    body = {"group_id": ctx.group, "generation_id_or_member_epoch": -1, "member_id": ""}
    answer = client.request(8, 8, {**body, "topics": offsets_topics()})
    code: int = answer["topics"][0]["partitions"][0]["error_code"]
    return code


def offset_fetch(client: RawClient, ctx: Ctx) -> int:
    topics = [{"name": "orders", "partition_indexes": [0]}]
    code: int = client.request(9, 7, {"group_id": ctx.group, "topics": topics})["error_code"]
    return code


def txn_offset_commit(client: RawClient, ctx: Ctx) -> int:
    body = {
        "transactional_id": ctx.txn,
        "group_id": ctx.group,
        "producer_id": ctx.pid,
        "producer_epoch": ctx.epoch,
        "generation_id": -1,
        "member_id": "",
        "topics": offsets_topics(),
    }
    code: int = client.request(28, 3, body)["topics"][0]["partitions"][0]["error_code"]
    return code


def group_request(api_key: int, version: int, **fields: Any) -> Callable[[RawClient, Ctx], int]:
    def send(client: RawClient, ctx: Ctx) -> int:
        code: int = client.request(api_key, version, {"group_id": ctx.group, **fields})[
            "error_code"
        ]
        return code

    return send


def find_coordinator(key_type: int) -> Callable[[RawClient, Ctx], int]:
    def send(client: RawClient, ctx: Ctx) -> int:
        key = ctx.txn if key_type else ctx.group
        code: int = client.request(10, 3, {"key": key, "key_type": key_type})["error_code"]
        return code

    return send


def describe_groups(client: RawClient, ctx: Ctx) -> int:
    code: int = client.request(15, 4, {"groups": [ctx.group]})["groups"][0]["error_code"]
    return code


def init_producer_id(transactional: bool) -> Callable[[RawClient, Ctx], int]:
    def send(client: RawClient, ctx: Ctx) -> int:
        body = {
            "transactional_id": ctx.txn if transactional else None,
            "transaction_timeout": 60_000,
        }
        code: int = client.request(22, 4, body)["error_code"]
        return code

    return send


def end_txn(client: RawClient, ctx: Ctx) -> int:
    body = {"transactional_id": ctx.txn, "producer_id": ctx.pid, "producer_epoch": ctx.epoch}
    code: int = client.request(26, 3, {**body, "committed": False})["error_code"]
    return code


@dataclass(frozen=True)
class Case:
    rpc: str
    send: Callable[[RawClient, Ctx], int]
    allowed: int  # alice's code (with every ACL it needs)
    others: dict[str, int]  # user lacking one ACL → the code Kafka answers
    setup: Callable[[Ctx], Ctx] = lambda ctx: ctx
    writes: bool = False  # whether alice's request writes to the log


TOPIC, GROUP, TXN, CLUSTER = 29, 30, 53, 31
UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED, ILLEGAL_GENERATION = 25, 79, 22
CASES = [
    Case(
        "Produce",
        lambda c, x: produce(c, x, transactional=False),
        0,
        {"no_topic_write": TOPIC},
        writes=True,
    ),
    Case(
        "Produce-transactional",
        lambda c, x: produce(c, x, transactional=True),
        0,
        {"no_txn": TXN, "no_topic_write": TOPIC},
        setup=lambda x: x.init().add_partition(),
        writes=True,
    ),
    Case(
        "Produce-transactional-without-transactional-id",
        produce_transactional_without_id,
        TXN,
        {"no_txn": TXN, "no_topic_write": TOPIC},
        setup=lambda x: x.init().add_partition(),
    ),
    Case("Fetch", fetch, 0, {"no_topic_read": TOPIC}),
    Case("ListOffsets", list_offsets, 0, {"no_topic": TOPIC}),
    Case("Metadata", metadata, 0, {"no_topic": TOPIC}),
    Case(
        "OffsetCommit", offset_commit, 0, {"no_group": GROUP, "no_topic_read": TOPIC}, writes=True
    ),
    Case("OffsetFetch", offset_fetch, 0, {"no_group": GROUP}),
    Case("FindCoordinator-group", find_coordinator(0), 0, {"no_group": GROUP}),
    Case("FindCoordinator-txn", find_coordinator(1), 0, {"no_txn": TXN}),
    Case(
        "JoinGroup",
        group_request(
            11,
            5,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
        ),
        MEMBER_ID_REQUIRED,
        {"no_group": GROUP},
    ),
    Case(
        "SyncGroup",
        group_request(14, 3, generation_id=1, member_id="m"),
        UNKNOWN_MEMBER_ID,
        {"no_group": GROUP},
    ),
    Case(
        "Heartbeat",
        group_request(12, 3, generation_id=1, member_id="m"),
        UNKNOWN_MEMBER_ID,
        {"no_group": GROUP},
    ),
    Case("LeaveGroup", group_request(13, 1, member_id="m"), UNKNOWN_MEMBER_ID, {"no_group": GROUP}),
    Case("DescribeGroups", describe_groups, 0, {"no_group": GROUP}),
    Case("InitProducerId", init_producer_id(True), 0, {"no_txn": TXN}, writes=True),
    Case(
        "InitProducerId-idempotent",
        init_producer_id(False),
        0,
        {"no_topic_read": 0, "cluster_only": 0, "no_topic": CLUSTER},
    ),
    Case(
        "AddPartitionsToTxn",
        add_partitions,
        0,
        {"no_txn": TXN, "no_topic_write": TOPIC},
        setup=Ctx.init,
        writes=True,
    ),
    Case(
        "AddOffsetsToTxn",
        add_offsets,
        0,
        {"no_txn": TXN, "no_group": GROUP},
        setup=Ctx.init,
        writes=True,
    ),
    Case(
        "EndTxn", end_txn, 0, {"no_txn": TXN}, setup=lambda x: x.init().add_partition(), writes=True
    ),
    Case(
        "TxnOffsetCommit",
        txn_offset_commit,
        0,
        {"no_txn": TXN, "no_group": GROUP, "no_topic_read": TOPIC},
        setup=lambda x: x.init().add_offsets(),
        writes=True,
    ),
    Case(
        "TxnOffsetCommit-stale-generation",
        txn_offset_commit_stale_generation,
        ILLEGAL_GENERATION,
        {"no_txn": TXN, "no_group": GROUP, "no_topic_read": TOPIC},
        setup=lambda x: x.init().add_offsets().member(),
    ),
]


@pytest.mark.parametrize(
    ("case", "user"),
    [(case, user) for case in CASES for user in ["alice", *case.others]],
    ids=[f"{case.rpc}-{user}" for case in CASES for user in ["alice", *case.others]],
)
def test_each_rpc_needs_its_acl_and_a_refusal_writes_nothing_R12_C31_B19(
    acl_server: ServeProcess, case: Case, user: str
) -> None:
    admin = plain_login(acl_server.port, "alice", "pw-alice")
    ctx = case.setup(Ctx(admin, f"{case.rpc}-{user}"))
    before = directory_bytes(acl_server.path, content_only=True)
    client = plain_login(acl_server.port, user, f"pw-{user}")
    code = case.send(client, ctx)
    after = directory_bytes(acl_server.path, content_only=True)
    client.close()
    admin.close()
    expected = case.allowed if user == "alice" else case.others[user]
    assert code == expected, f"{case.rpc} by {user}: error code {code}, expected {expected}"
    if expected != 0:
        assert after == before, f"a refused {case.rpc} changed the log"
    if user == "alice" and case.writes:
        assert after != before, f"an allowed {case.rpc} wrote nothing: was it really served?"


def test_listings_show_only_what_the_principal_may_describe(acl_server: ServeProcess) -> None:
    alice = plain_login(acl_server.port, "alice", "pw-alice")
    nobody = plain_login(acl_server.port, "no_topic", "pw-no_topic")
    all_topics = {"topics": None}
    assert "orders" in [t["name"] for t in alice.request(3, 9, all_topics)["topics"]]
    assert [t["name"] for t in nobody.request(3, 9, all_topics)["topics"]] == []
    assert nobody.request(9, 7, {"group_id": "g-listing", "topics": None})["topics"] == []
    joined = group_request(
        11,
        5,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    assert joined(alice, Ctx(alice, "listing")) == 79  # MEMBER_ID_REQUIRED: g-listing exists
    no_group = plain_login(acl_server.port, "no_group", "pw-no_group")
    assert "g-listing" in [g["group_id"] for g in alice.request(16, 3, {})["groups"]]
    assert no_group.request(16, 3, {})["groups"] == []
    no_group.close()
    alice.close()
    nobody.close()


def test_a_confluent_producer_without_write_gets_topic_authorization_failed(
    acl_server: ServeProcess,
) -> None:
    before = directory_bytes(acl_server.path, content_only=True)
    config = sasl_config("SCRAM-SHA-256", "no_topic_write", "pw-no_topic_write")
    producer = confluent_producer(acl_server.bootstrap, **config, **{"message.timeout.ms": 5000})
    with pytest.raises(AssertionError, match="TOPIC_AUTHORIZATION_FAILED"):
        produce_all(producer, [("orders", 0, b"refused")])
    assert directory_bytes(acl_server.path, content_only=True) == before
    writer = confluent_producer(acl_server.bootstrap, **sasl_config("PLAIN", "alice", "pw-alice"))
    assert len(produce_all(writer, [("orders", 0, b"allowed")])) == 1


def test_deny_wins_prefixes_match_and_read_or_write_imply_describe() -> None:
    rules = [
        AclRule("User:*", ResourceType.TOPIC, "orders-*", Operation.WRITE, True),
        AclRule("User:eve", ResourceType.TOPIC, "orders-secret", Operation.ALL, False),
        AclRule("User:bob", ResourceType.GROUP, "g", Operation.READ, True),
    ]
    acls = Authorizer(rules)
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    assert acls.allows("User:eve", topic, "orders-eu", Operation.WRITE)
    assert not acls.allows("User:eve", topic, "orders-secret", Operation.WRITE)  # deny wins
    assert acls.allows("User:bob", topic, "orders-secret", Operation.DESCRIBE)  # Write ⇒ Describe
    assert not acls.allows("User:bob", topic, "orders-secret", Operation.READ)
    assert not acls.allows("User:bob", topic, "orders", Operation.WRITE)  # prefix is "orders-"
    assert acls.allows("User:bob", group, "g", Operation.DESCRIBE)
    assert not acls.allows("User:bob", group, "g2", Operation.READ)  # no rule: refused
    assert not acls.allows("User:carol", group, "g", Operation.READ)


def test_acl_file_errors_name_the_line_and_the_field(tmp_path: Path) -> None:
    from txn_wire.acl import AclFileError, load_acls

    path = write_acls(
        tmp_path / "acls.txt", ["User:a topic orders Write allow", "User:a topic x Wirte allow"]
    )
    with pytest.raises(AclFileError, match=r"line 3: operation 'Wirte' is not one of"):
        load_acls(path)
    write_acls(path, ["alice topic orders Write allow"])
    with pytest.raises(AclFileError, match=r"principal 'alice' must be User:NAME"):
        load_acls(path)


def test_acls_without_sasl_apply_to_user_anonymous(log_dir: Path, tmp_path: Path) -> None:
    acls = write_acls(
        tmp_path / "acls.txt",
        ["User:ANONYMOUS topic orders Read allow", "User:ANONYMOUS group g-* Read allow"],
    )
    served = start_serve(log_dir, "--acl-file", str(acls))
    try:
        assert "User:ANONYMOUS" in served.banner[1] and "2 ACL rules" in served.banner[1]
        client = RawClient(served.port)
        ctx = Ctx(client, "anonymous")
        before = directory_bytes(log_dir, content_only=True)
        assert produce(client, ctx, transactional=False) == 29  # Read only: no Write
        assert directory_bytes(log_dir, content_only=True) == before
        assert fetch(client, ctx) == 0
        assert init_producer_id(True)(client, ctx) == 53
        joined = group_request(
            11,
            5,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
        )
        assert joined(client, ctx) == 79  # MEMBER_ID_REQUIRED: allowed; the group now exists
        ctx.group = "other"
        assert joined(client, ctx) == 30
        listed = client.request(16, 3, {})
        assert [g["group_id"] for g in listed["groups"]] == ["g-anonymous"]
        client.close()
    finally:
        served.stop()


def test_a_confluent_transactional_producer_needs_write_on_its_transactional_id_C31(
    acl_server: ServeProcess,
) -> None:
    """alice (Write on t-*) commits a transaction; no_txn's init_transactions fails with
    Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing it tried is in the log."""
    before_end = _log_end(acl_server.path)
    allowed = Producer(
        {
            "bootstrap.servers": acl_server.bootstrap,
            "transactional.id": "t-confluent",
            **sasl_config("SCRAM-SHA-512", "alice", "pw-alice"),
        }
    )
    allowed.init_transactions(WAIT_S)
    allowed.begin_transaction()
    allowed.produce("orders", b"committed", partition=0)
    allowed.commit_transaction(WAIT_S)
    assert _log_end(acl_server.path) == before_end + 2  # the record and the COMMIT marker
    before = directory_bytes(acl_server.path, content_only=True)
    refused = Producer(
        {
            "bootstrap.servers": acl_server.bootstrap,
            "transactional.id": "t-confluent",
            **sasl_config("SCRAM-SHA-256", "no_txn", "pw-no_txn"),
        }
    )
    with pytest.raises(KafkaException) as raised:
        refused.init_transactions(WAIT_S)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert directory_bytes(acl_server.path, content_only=True) == before  # alice not fenced


def test_kafka_python_logs_in_with_scram_sha_512_and_is_refused_a_topic_it_may_not_read(
    acl_server: ServeProcess,
) -> None:
    config = {
        "bootstrap_servers": acl_server.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
    }
    producer = kafka.KafkaProducer(
        **config, sasl_plain_username="alice", sasl_plain_password="pw-alice"
    )
    sent = producer.send("orders", b"kafka-python", partition=0).get(timeout=WAIT_S)
    producer.close()
    reader = kafka.KafkaConsumer(
        **config,
        sasl_plain_username="no_topic_read",
        sasl_plain_password="pw-no_topic_read",
        enable_auto_commit=False,
    )
    reader.assign([kafka.TopicPartition("orders", 0)])
    reader.seek(kafka.TopicPartition("orders", 0), sent.offset)
    with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
        reader.poll(timeout_ms=WAIT_S * 1000)
    reader.close()


def _log_end(path: Path) -> int:
    with Log.open(path) as log:
        return log.partition_reader(TopicPartition("orders", 0)).log_end_offset
