"""``txnlog transactions abort --topic T --partition P --start-offset N`` (kafka-transactions
abort, KIP-664): the ABORT marker for a hanging transaction, and every refusal, each naming
the partition, the offset or producer and what would be valid, writing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import directory_bytes, open_transaction
from tests.txn_log.cli.test_cli import txnlog
from tests.txn_log.cli.test_operator_live import HANGING_EPOCH, HANGING_PRODUCER, hang
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """orders-0: one record, then a hanging transaction from offset 1; orders-1: the open
    transaction of transactional id 'owned', which the coordinator knows."""
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        producer = log.producer()
        producer.send("orders", b"plain", partition=0)
        producer.flush()
        producer.close()
        open_transaction(log, "owned", [("orders", 1, b"owned")])
    hang(path, P0)
    return path


def abort(log_dir: Path, *options: object) -> tuple[int, str]:
    result = txnlog("transactions", "abort", log_dir, *options)
    return result.returncode, result.stdout + result.stderr


def test_the_partitions_own_producer_and_epoch_by_default(log_dir: Path) -> None:
    code, out = abort(log_dir, "--topic", "orders", "--partition", "0", "--start-offset", "1")
    assert code == 0, out
    assert (
        f"Wrote an ABORT marker at offset 2 of orders-0 for producer {HANGING_PRODUCER} "
        f"(epoch {HANGING_EPOCH}), ending its transaction from offset 1." in out
    )
    with Log.open(log_dir, read_only=True) as log:
        assert log.partition_reader(P0).last_stable_offset == 3
        assert [r.value for r in log.consumer().read(P0, 0)] == [b"plain"]
    code, out = abort(log_dir, "--topic", "orders", "--partition", "0", "--start-offset", "1")
    assert code == 1 and "no open transaction starts at offset 1" in out  # done: not twice


@pytest.mark.parametrize(
    ("options", "exit_code", "message"),
    [
        (
            ["--topic", "orders", "--partition", "0", "--start-offset", "0"],
            1,
            "InvalidTxnStateError: orders-0: no open transaction starts at offset 0; open "
            f"transactions there: producer {HANGING_PRODUCER} from offset 1",
        ),
        (
            ["--topic", "orders", "--partition", "0", "--start-offset", "1", "--producer-id", "5"],
            1,
            f"the open transaction at offset 1 is producer {HANGING_PRODUCER}'s, not producer 5's",
        ),
        (
            [
                "--topic",
                "orders",
                "--partition",
                "0",
                "--start-offset",
                "1",
                "--producer-epoch",
                "2",
            ],
            1,
            f"InvalidProducerEpochError: orders-0: producer {HANGING_PRODUCER} is at epoch 3 "
            "there; an ABORT marker of epoch 2 would be stale (give 3 or more)",
        ),
        (
            ["--topic", "orders", "--partition", "1", "--start-offset", "0"],
            1,
            "(transactional id 'owned'), so it is not hanging; end it with `txnlog transactions "
            "abort PATH owned`",
        ),
        (
            ["--topic", "orders", "--partition", "9", "--start-offset", "0"],
            2,
            "partition 9 of topic 'orders' does not exist; valid partitions are 0..1",
        ),
        (
            ["--topic", "orders", "--partition", "0"],
            2,
            "abort needs a TRANSACTIONAL_ID, or --topic, --partition and --start-offset",
        ),
        (
            ["owned", "--topic", "orders", "--partition", "1", "--start-offset", "0"],
            2,
            "give a TRANSACTIONAL_ID, or --topic, --partition and --start-offset, not both",
        ),
    ],
)
def test_refusals_name_what_is_valid_and_write_nothing(
    log_dir: Path, options: list[str], exit_code: int, message: str
) -> None:
    before = directory_bytes(log_dir, content_only=True)
    code, out = abort(log_dir, *options)
    assert code == exit_code, out
    assert message in out
    assert directory_bytes(log_dir, content_only=True) == before
    with Log.open(log_dir, read_only=True) as log:
        assert log.partition_reader(P0).last_stable_offset == 1
        assert log.partition_reader(P1).last_stable_offset == 0
