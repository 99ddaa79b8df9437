"""The same data read three ways agrees exactly (issue 15): committed and aborted
transactions written by the engine and by an unmodified Kafka client through ``txnlog serve``,
then read through a Kafka client over the wire (confluent-kafka), through the engine API, and
through Spark's ``format("txnlog")`` on the directory, while the server keeps running over it
(DESIGN §3: the server is one more peer of the directory). Under read_committed (B-05, B-12)
all three hold exactly the committed records; under read_uncommitted all three hold every
data record, aborted ones included, and no control record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.txn_wire.mixed_transactions import (
    Row,
    Sent,
    by_partition,
    confluent_rows,
    engine_rows,
    engine_transactions,
    in_send_order,
)
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S
from txn_log.log import Log

TOPIC = "orders"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic(TOPIC, 2)
    server = start_serve(path)
    try:
        yield server
    finally:
        server.stop()


def wire_transactions(server: ServeProcess) -> list[Sent]:
    """confluent-kafka's transactional producer: commit, abort (its records acked, so in the
    log before the ABORT marker), commit. Returns the committed records in sending order."""
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "transactional.id": "wire-txn", "linger.ms": 5}
    )
    producer.init_transactions(WAIT_S)
    committed: list[Sent] = []
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(5):
            key, value = f"wk{round_}-{i}".encode(), f"wire-{round_}-{i}".encode()
            producer.produce(TOPIC, value, key=key, partition=i % 2)
            if commit:
                committed.append((i % 2, key, value))
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.flush(WAIT_S)
            producer.abort_transaction(WAIT_S)
    return committed


def spark_rows(spark: Any, path: Path, isolation: str) -> list[Row]:
    df = (
        spark.read.format("txnlog")
        .option("subscribe", TOPIC)
        .option("isolation.level", isolation)
        .load(str(path))
    )
    rows = [(r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect()]
    return sorted(rows, key=lambda row: (row[1], row[2]))


def test_wire_engine_and_spark_read_the_same_records_B05_B12(
    spark: Any, served: ServeProcess
) -> None:
    path = served.path
    committed = engine_transactions(path, TOPIC)
    committed += wire_transactions(served)
    committed += engine_transactions(path, TOPIC, transactional_id="engine-txn-2")

    wire = confluent_rows(served.bootstrap, served.path, TOPIC, "read_committed")
    engine = engine_rows(path, TOPIC, "read_committed")
    through_spark = spark_rows(spark, path, "read_committed")
    assert wire == engine == through_spark
    assert in_send_order(wire) == by_partition(committed)  # exactly the committed records
    assert len({(row[1], row[2]) for row in wire}) == len(wire)  # each offset once

    wire_all = confluent_rows(served.bootstrap, served.path, TOPIC, "read_uncommitted")
    assert wire_all == engine_rows(path, TOPIC, "read_uncommitted")
    assert wire_all == spark_rows(spark, path, "read_uncommitted")
    aborted = {v for *_, v in set(wire_all) - set(wire)}
    assert aborted == {
        f"{txn_id}-a1-{i}".encode() for txn_id in ("engine-txn", "engine-txn-2") for i in range(6)
    } | {f"wire-1-{i}".encode() for i in range(5)}
