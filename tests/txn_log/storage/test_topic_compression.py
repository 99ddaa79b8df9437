"""A topic's ``compression.type`` is applied on append, as Kafka's LogValidator applies it: a
client batch in another codec is stored compressed again in the topic's codec, keeping its
producer id, epoch and sequence (P-08), its transactional bit (F-14), timestamps, headers and
offsets (F-05); ``producer`` keeps every batch as sent; control batches are never recompressed
(F-13, F-31); a batch the new codec makes too large is refused with nothing written (F-09).
KIP-31 removed recompression for the common case (T-01); a codec set on the topic brings
it back for the batches that need it, as in Kafka.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.support import directory_bytes
from txn_log.errors import RecordTooLargeError
from txn_log.log import Log
from txn_log.record.batch_header import Compression, parse_header, validate_batch
from txn_log.record.codec import decode_batch, encode_records
from txn_log.record.control import ControlType, encode_control_batch
from txn_log.storage.log_validator import maybe_recompress
from txn_log.topic_config import COMPRESSION_TYPES, TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000
RECORDS = [
    (b"k1", b"value-1" * 50, NOW, (("h", b"x"),)),
    (None, b"value-2" * 50, NOW + 7, ()),
    (b"k3", None, NOW - 3, (("a", b""), ("b", None))),
]


def stored_codec(topic_codec: str, source: Compression) -> Compression:
    if topic_codec == "producer":
        return source
    return Compression.NONE if topic_codec == "uncompressed" else Compression[topic_codec.upper()]


@pytest.mark.parametrize(
    ("topic_codec", "source"), list(itertools.product(COMPRESSION_TYPES, list(Compression)))
)
def test_a_batch_is_stored_in_the_topics_codec_with_everything_else_kept(
    tmp_path: Path, topic_codec: str, source: Compression
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"compression.type": topic_codec})
        sent = encode_records(
            RECORDS, now_ms=NOW, compression=source, producer_id=7, producer_epoch=3,
            base_sequence=0, transactional=False,
        )  # fmt: skip
        result = log.partition_log(TP).append(sent)
        [(header, data)] = list(log.partition_reader(TP).read(0, 3))
    before = parse_header(sent)
    assert header.compression is stored_codec(topic_codec, source)
    validate_batch(data)  # length and CRC-32C of the stored bytes
    kept = ("producer_id", "producer_epoch", "base_sequence", "base_timestamp", "max_timestamp",
            "last_offset_delta", "records_count", "partition_leader_epoch")  # fmt: skip
    assert [getattr(header, f) for f in kept] == [getattr(before, f) for f in kept]
    assert header.attributes & ~0x07 == before.attributes & ~0x07
    assert (result.base_offset, result.last_offset) == (0, 2)
    assert decode_batch(data).records.to_pylist() == decode_batch(sent).records.to_pylist()
    if header.compression is source:
        assert data == sent  # nothing to convert: the bytes as the producer sent them


def test_a_retried_batch_is_answered_as_a_duplicate_after_its_first_copy_was_recompressed(
    tmp_path: Path,
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"compression.type": "gzip"})
        batch = encode_records(
            RECORDS, now_ms=NOW, producer_id=1, producer_epoch=0, base_sequence=0
        )
        first = log.partition_log(TP).append(batch)
        retry = log.partition_log(TP).append(batch)
        assert (retry.base_offset, retry.last_offset, retry.duplicate) == (0, 2, True)
        assert not first.duplicate and log.partition_reader(TP).log_end_offset == 3


def test_transactions_of_a_producer_whose_codec_differs_still_commit_and_abort(
    tmp_path: Path,
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"compression.type": "zstd"})
        producer = log.producer("tx", compression="gzip")
        producer.init_transactions()
        for value, commit in ((b"aborted", False), (b"committed", True)):
            producer.begin_transaction()
            producer.send("t", value, partition=0)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
        data_batches = [h for h, _ in log.partition_reader(TP).read(0, 4) if not h.is_control]
        assert [h.compression for h in data_batches] == [Compression.ZSTD] * 2
        assert all(h.is_transactional for h in data_batches)
        committed = [r.value for r in log.consumer("read_committed").read(TP, 0)]
        assert committed == [b"committed"]


def test_a_batch_too_large_in_the_topics_codec_is_refused_with_nothing_written(
    tmp_path: Path,
) -> None:
    with Log.open(tmp_path / "log", housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"compression.type": "uncompressed", "max.message.bytes": "2000"})
        log.partition_log(TP)
        before = directory_bytes(log.path, content_only=True)
        small_in_gzip = encode_records(
            [(None, b"a" * 10_000, NOW, ())], now_ms=NOW, compression=Compression.GZIP
        )
        assert len(small_in_gzip) < 2000
        with pytest.raises(RecordTooLargeError, match=r"compression\.type uncompressed"):
            log.partition_log(TP).append(small_in_gzip)
        assert directory_bytes(log.path, content_only=True) == before


def test_control_batches_are_never_recompressed() -> None:
    marker = bytearray(
        encode_control_batch(
            ControlType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
            timestamp_ms=NOW,
        )
    )  # fmt: skip
    config = TopicConfig(compression_type="zstd")
    kept, header = maybe_recompress(TP, config, marker, parse_header(marker))
    assert kept is marker and header.compression is Compression.NONE
