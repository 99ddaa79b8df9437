"""Walking the record batches of a buffer, a test oracle: ``iter_batches`` splits a fetched
``records`` field (or any run of whole batches) into its batches by their length fields alone,
as Kafka's ``MemoryRecords.batches`` does. No product path needs exactly this: segments are
walked by ``storage/batch_scan`` (CRC-checked, with its torn-tail rules), and the wire server
splits a produced ``records`` field by a stricter rule (``txn_wire/produce.split_batches``:
trailing bytes are an error there, not a torn tail). Shared by the codec tests and the wire
tests that split what ``txnlog serve`` answers."""

from __future__ import annotations

from collections.abc import Iterator

from txn_log.record.batch_header import HEADER_SIZE, BatchHeader, parse_header


def iter_batches(
    buf: bytes | bytearray | memoryview, position: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch in ``buf`` from ``position`` on.

    Stops without error at a short tail (a torn write: fewer bytes than the next header or
    batch needs); raises ``CorruptRecordError`` on a bad magic or length. CRCs are not checked.
    """
    view = memoryview(buf)
    while len(view) - position >= HEADER_SIZE:
        header = parse_header(view, position)
        if position + header.size_in_bytes > len(view):
            return
        yield position, header
        position += header.size_in_bytes
