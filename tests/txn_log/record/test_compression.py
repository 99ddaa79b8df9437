"""Batch codecs (F-13): round trips, Kafka's stream formats, interop with kafka-python."""

from __future__ import annotations

import gzip
import os
import struct

import lz4.frame
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from txn_log.errors import CorruptRecordError, UnsupportedCompressionTypeError
from txn_log.record.batch_header import Compression
from txn_log.record.compression import compress, decompress, supported_codecs

PAYLOADS = [b"", b"x", os.urandom(70_000), b"abc" * 50_000, os.urandom(16) * 9_000]
KAFKA_PYTHON_CODECS = [Compression.GZIP, Compression.LZ4, Compression.ZSTD]


def test_every_codec_is_supported_by_this_build() -> None:
    assert set(supported_codecs()) == set(Compression)


@settings(max_examples=40)
@given(st.binary(max_size=3000), st.sampled_from(list(Compression)))
def test_round_trip(data: bytes, codec: Compression) -> None:
    assert decompress(compress(data, codec), codec) == data


@pytest.mark.parametrize("data", PAYLOADS, ids=lambda d: f"{len(d)}B")
@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS, ids=lambda c: c.name)
def test_kafka_python_reads_ours_and_we_read_kafka_pythons(codec: Compression, data: bytes) -> None:
    decoders = {
        Compression.GZIP: kafka_codec.gzip_decode,
        Compression.LZ4: kafka_codec.lz4_decode,
        Compression.ZSTD: kafka_codec.zstd_decode,
    }
    encoders = {
        Compression.GZIP: kafka_codec.gzip_encode,
        Compression.LZ4: kafka_codec.lz4_encode,
        Compression.ZSTD: kafka_codec.zstd_encode,
    }
    if data or codec is not Compression.ZSTD:  # kafka-python cannot size an empty zstd frame
        assert decoders[codec](compress(data, codec)) == data
    assert decompress(encoders[codec](data), codec) == data


def test_lz4_writes_independent_blocks_for_kafkas_java_reader() -> None:
    framed = compress(os.urandom(200_000), Compression.LZ4)
    magic, flg, bd = struct.unpack_from("<IBB", framed)
    assert magic == 0x184D2204
    assert flg & 0x20, "Java's KafkaLZ4BlockInputStream rejects linked blocks"
    assert flg >> 6 == 1  # frame version 01
    assert bd == 0x40  # 64 KiB maximum block size
    assert framed[6] == 0x82  # header checksum: (xxh32(FLG, BD) >> 8) & 0xFF
    assert framed.endswith(b"\x00\x00\x00\x00")


@pytest.mark.parametrize("linked", [True, False])
def test_lz4_reads_linked_and_independent_frames(linked: bool) -> None:
    data = b"hello kafka " * 20_000
    framed = lz4.frame.compress(data, block_linked=linked, content_checksum=True)
    assert decompress(framed, Compression.LZ4) == data


def test_snappy_writes_xerial_framing_like_the_java_client() -> None:
    data = b"0123456789" * 10_000
    framed = compress(data, Compression.SNAPPY)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first_block,) = struct.unpack_from(">i", framed, 16)
    raw = pa.decompress(
        framed[20 : 20 + first_block], decompressed_size=32 * 1024, codec="snappy", asbytes=True
    )
    assert raw == data[: 32 * 1024]


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them() -> None:
    data = b"librdkafka" * 1000
    raw = pa.compress(data, codec="snappy", asbytes=True)
    assert decompress(raw, Compression.SNAPPY) == data


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(gzip.compress(b"abc") + gzip.compress(b"def"), Compression.GZIP) == b"abcdef"


@pytest.mark.parametrize("code", [5, 6, 7])
def test_unknown_codec_code_is_unsupported(code: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match=f"unknown compression code {code}"):
        compress(b"x", code)
    with pytest.raises(UnsupportedCompressionTypeError, match="zstd"):
        decompress(b"x", code)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_garbage_input_is_corrupt(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError, match=codec.name.lower()):
        decompress(
            b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x7f\xff" + b"\x13" * 40, codec
        )


def test_truncated_gzip_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(compress(os.urandom(1000), Compression.GZIP)[:-20], Compression.GZIP)
