"""Batch compression codecs, byte-compatible with Kafka's (F-13: attribute bits 0-2).

A compressed v2 batch keeps its 61-byte header in the clear and compresses the records section
as one stream (F-03 wrapper messages are gone in v2). Formats written and read:

    code  codec   written as                                          read
    ----  ------  --------------------------------------------------  -------------------------
       0  none    the records as they are                             same
       1  gzip    one RFC 1952 gzip member (stdlib zlib)              gzip or zlib, many members
       2  snappy  xerial framing, as Kafka's Java client writes it:   xerial framing, or raw
                  ``\\x82SNAPPY\\x00`` + version 1 + compatible 1       snappy as librdkafka
                  (int32 BE each), then per 32 KiB block an int32 BE  writes it
                  length and a raw snappy block
       3  lz4     LZ4 *frame* (magic 0x184D2204), independent 64 KiB  any LZ4 frame
                  blocks, no checksums: FLG 0x60, BD 0x40, HC 0x82
       4  zstd    one zstd frame                                      any zstd frames

LZ4 detail: Kafka's Java reader (KafkaLZ4BlockInputStream) rejects frames whose FLG lacks the
block-independence bit ("Dependent block stream is unsupported"), and pyarrow's frame codec
writes linked blocks. So the frame is assembled here from pyarrow's raw LZ4 *block* codec, one
independent block per 64 KiB; the header bytes are constant (HC is xxh32 of FLG, BD).

Decompression is bounded (DESIGN §4): a records section may inflate to at most ``max_size``
bytes (``MAX_RECORDS_BYTES`` unless the caller passes its topic's limit, ``records_limit``).
Every codec is inflated in steps that never produce more than the bytes still allowed, so a
small batch that would expand to gigabytes raises ``RecordTooLargeError`` having allocated at
most ``max_size`` plus one step, never the whole expansion: gzip through ``max_length``,
snappy by its length preambles before anything is allocated, LZ4 and zstd by reading their
streams a step at a time.

Invariants: ``decompress(compress(data, c), c) == data`` for every supported ``c`` and
``len(data) <= max_size``; errors in compressed input raise ``CorruptRecordError``; an unknown
or unavailable codec raises ``UnsupportedCompressionTypeError`` naming it and listing what
this build supports. pyarrow is imported inside the functions so that importing the package
stays cheap.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from txn_log.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    TxnLogError,
    UnsupportedCompressionTypeError,
)
from txn_log.record.batch_header import Compression

Buffer = bytes | bytearray | memoryview

_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")  # magic, FLG, BD (64 KiB), HC
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_LZ4_BLOCK = struct.Struct("<I")  # block size, high bit = stored uncompressed

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, min compatible version
_XERIAL_BLOCK = struct.Struct(">i")  # length of the raw snappy block that follows
_XERIAL_BLOCK_SIZE = 32 * 1024  # the xerial library's default, as Kafka's Java client uses

_ARROW_CODEC = {Compression.LZ4: "lz4", Compression.ZSTD: "zstd"}
_STEP = 1 << 20  # bytes inflated per step of a bounded stream

MAX_RECORDS_BYTES = 64 * 1024 * 1024
"""How far a records section may inflate when its topic allows less (``records_limit``).
Kafka's clients cap a batch before compression (librdkafka's ``batch.size``, 1 MB; Java's
``batch.size`` with ``max.request.size``, 1 MB), so a legitimate batch inflates to about a
megabyte; 64 times that leaves room for any client's settings while refusing bombs."""


def records_limit(max_message_bytes: int) -> int:
    """How far a records section of a topic with this ``max.message.bytes`` may inflate: the
    larger of ``MAX_RECORDS_BYTES`` and the topic's own limit (the engine's producers cap an
    uncompressed batch at ``max.message.bytes``, so whatever they wrote stays readable)."""
    return max(MAX_RECORDS_BYTES, max_message_bytes)


def supported_codecs() -> tuple[Compression, ...]:
    """Codecs this build can both write and read."""
    return tuple(codec for codec in Compression if _is_available(codec))


def _is_available(codec: Compression) -> bool:
    if codec in (Compression.NONE, Compression.GZIP):
        return True
    import pyarrow as pa

    names = {Compression.SNAPPY: "snappy", Compression.LZ4: "lz4_raw", Compression.ZSTD: "zstd"}
    return bool(pa.Codec.is_available(names[codec]))


def _require(codec: Compression | int) -> Compression:
    parsed = Compression.parse(int(codec))
    if not _is_available(parsed):
        raise UnsupportedCompressionTypeError(
            f"compression codec {parsed.name.lower()} is not available in this build "
            f"(pyarrow lacks it); supported: "
            f"{', '.join(c.name.lower() for c in supported_codecs())}"
        )
    return parsed


def compress(data: Buffer, codec: Compression | int) -> bytes:
    """The compressed stream of ``data`` in the format Kafka writes for ``codec``."""
    parsed = _require(codec)
    if parsed is Compression.NONE:
        return bytes(data)
    if parsed is Compression.GZIP:
        packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    if parsed is Compression.LZ4:
        return _lz4_frame(memoryview(data))
    if parsed is Compression.SNAPPY:
        return _xerial_snappy(memoryview(data))
    import pyarrow as pa

    return bytes(pa.compress(data, codec=_ARROW_CODEC[parsed], asbytes=True))


def decompress(data: Buffer, codec: Compression | int, max_size: int = MAX_RECORDS_BYTES) -> bytes:
    """The records section inside a compressed stream; ``CorruptRecordError`` if it is bad,
    ``RecordTooLargeError`` (before allocating more than ``max_size`` and one step) if it
    inflates past ``max_size`` bytes."""
    parsed = _require(codec)
    if parsed is Compression.NONE:
        return bytes(data)
    try:
        if parsed is Compression.GZIP:
            return _gunzip(data, max_size)
        if parsed is Compression.SNAPPY:
            return _unsnappy(memoryview(data), max_size)
        return _read_stream(data, parsed, max_size)
    except TxnLogError:
        raise  # RecordTooLargeError and CorruptRecordError are ValueErrors too: kept as raised
    except (OSError, ValueError, zlib.error) as error:
        raise CorruptRecordError(
            f"{parsed.name.lower()} records section fails to decompress: {error}"
        ) from error


def _too_large(codec: Compression, max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"{codec.name.lower()} records section would decompress to more than {max_size} bytes, "
        "the most a batch may inflate to (refused before it was inflated: a decompression bomb, "
        "or a batch over max.message.bytes)"
    )


def _read_stream(data: Buffer, codec: Compression, max_size: int) -> bytes:
    """An LZ4 or zstd stream read a step at a time, refused once it passes ``max_size``."""
    import pyarrow as pa

    stream = pa.CompressedInputStream(pa.BufferReader(data), _ARROW_CODEC[codec])
    parts: list[bytes] = []
    total = 0
    while True:
        part = stream.read(min(_STEP, max_size - total + 1))
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > max_size:
            raise _too_large(codec, max_size)
        parts.append(part)


def _gunzip(data: Buffer, max_size: int) -> bytes:
    """All members of a gzip stream (Java's GZIPInputStream reads concatenated members),
    inflated at most ``max_size - total + 1`` bytes at a time (``max_length``)."""
    parts: list[bytes] = []
    total = 0
    remaining = bytes(data)
    while remaining:
        unpacker = zlib.decompressobj(47)  # 32 + 15: gzip or zlib header, detected
        pending = remaining
        while not unpacker.eof:  # zlib may hold output back for input it has consumed
            part = unpacker.decompress(pending, max(1, max_size - total + 1))
            total += len(part)
            if total > max_size:
                raise _too_large(Compression.GZIP, max_size)
            parts.append(part)
            pending = unpacker.unconsumed_tail
            if not part and not pending:
                break
        if not unpacker.eof:
            raise CorruptRecordError("gzip records section is truncated")
        remaining = unpacker.unused_data
    return b"".join(parts)


def _lz4_frame(data: memoryview) -> bytes:
    import pyarrow as pa

    parts = [_LZ4_FRAME_HEADER]
    for start in range(0, len(data), _LZ4_BLOCK_SIZE):
        block = data[start : start + _LZ4_BLOCK_SIZE]
        packed: Any = pa.compress(block, codec="lz4_raw", asbytes=True)
        if len(packed) < len(block):
            parts += [_LZ4_BLOCK.pack(len(packed)), packed]
        else:  # incompressible: store the block as is, flagged by the high bit
            parts += [_LZ4_BLOCK.pack(len(block) | _LZ4_UNCOMPRESSED_BIT), bytes(block)]
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _xerial_snappy(data: memoryview) -> bytes:
    import pyarrow as pa

    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        packed: Any = pa.compress(
            data[start : start + _XERIAL_BLOCK_SIZE], codec="snappy", asbytes=True
        )
        parts += [_XERIAL_BLOCK.pack(len(packed)), packed]
    return b"".join(parts)


def _unsnappy(data: memoryview, max_size: int) -> bytes:
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _raw_snappy(data, max_size)
    parts = []
    total = 0
    position = _XERIAL_HEADER.size
    while position < len(data):
        if position + _XERIAL_BLOCK.size > len(data):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _XERIAL_BLOCK.unpack_from(data, position)
        position += _XERIAL_BLOCK.size
        if length < 0 or position + length > len(data):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes is truncated")
        part = _raw_snappy(data[position : position + length], max_size - total)
        total += len(part)
        parts.append(part)
        position += length
    return b"".join(parts)


def _raw_snappy(block: memoryview, max_size: int) -> bytes:
    """A raw snappy block: its uncompressed size leads as an unsigned varint, checked against
    ``max_size`` before anything is allocated."""
    import pyarrow as pa

    size = 0
    for index in range(min(5, len(block))):
        size |= (block[index] & 0x7F) << (7 * index)
        if not block[index] & 0x80:
            break
    else:
        raise CorruptRecordError("snappy block has no valid length preamble")
    if size > max_size:
        raise _too_large(Compression.SNAPPY, max_size)
    return bytes(pa.decompress(block, decompressed_size=size, codec="snappy", asbytes=True))
