"""The validator's two walks of a records section agree (issue 24): record by record for small
batches (``_walk_records``), all at once with numpy above ``SMALL_BATCH_RECORDS``
(``record_layout``). On any records section, well formed or mutated, both accept it with the
same offset deltas and keyless count, or both refuse it with the same kind of error (F-16..F-19,
F-24)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_log.errors import CorruptRecordError, InvalidRecordError, TxnLogError
from txn_log.record.batch_header import HEADER_SIZE
from txn_log.record.batch_records import SMALL_BATCH_RECORDS, _walk_records
from txn_log.record.codec import encode_records
from txn_log.record.columnar_decode import headers_column, record_layout

NOW = 1_700_000_000_000

records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=10)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(
            st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=2 * SMALL_BATCH_RECORDS,
)


def numpy_walk(data: bytes, count: int) -> tuple[list[int], tuple[int, ...]]:
    layout = record_layout(data, HEADER_SIZE, len(data), count)
    headers_column(data, layout)
    deltas = [int(d) for d in layout.offset_delta]
    return deltas, tuple(int(i) for i in np.flatnonzero(layout.key_length < 0))


def outcome(walk, data: bytes, count: int):  # type: ignore[no-untyped-def]
    try:
        return walk(data, count)
    except (CorruptRecordError, InvalidRecordError) as error:
        return type(error)
    except TxnLogError as error:  # any other kind is a failure of this test
        pytest.fail(f"{type(error).__name__}: {error}")


def assert_walks_agree(
    data: st.DataObject, batch: bytearray, count: int, *, mutations: int = 2
) -> None:
    """Mutate up to ``mutations`` bytes of ``batch``'s records and sometimes miscount them by
    one; the record-by-record walk and the all-at-once one must then give the same outcome
    (F-18). A count below one is no section to walk."""
    for _ in range(data.draw(st.integers(0, mutations))):
        at = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
    count += data.draw(st.sampled_from([0, 0, 0, -1, 1]))  # sometimes a wrong count
    if count < 1:
        return
    section = bytes(batch)
    by_record = outcome(lambda d, c: _walk_records(d, HEADER_SIZE, len(d), c), section, count)
    assert outcome(numpy_walk, section, count) == by_record


@settings(max_examples=400, deadline=None)
@given(records, st.data())
def test_both_walks_agree_on_any_records_section(
    shapes: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    data: st.DataObject,
) -> None:
    batch = bytearray(encode_records([(k, v, NOW, tuple(h)) for k, v, h in shapes], now_ms=NOW))
    assert_walks_agree(data, batch, len(shapes), mutations=3)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=SMALL_BATCH_RECORDS + 1, max_value=3 * SMALL_BATCH_RECORDS),
    st.integers(min_value=0, max_value=12),  # key length (0 = null key)
    st.integers(min_value=0, max_value=200),  # value length
    st.data(),
)
def test_records_of_one_size_found_at_once_agree_with_the_walk(
    count: int, key_size: int, value_size: int, data: st.DataObject
) -> None:
    """Sections whose records all have the first one's length take the all-at-once start
    finder (``_run_starts``, one run): for intact ones, one record resized (the same section
    length made by another split), mutated bytes and wrong counts, it agrees with the
    record-by-record walk (F-18)."""
    key = b"k" * key_size if key_size else None
    shapes = [(key, b"v" * value_size, ())] * count
    if data.draw(st.booleans()):  # one record longer, one shorter: the same section length
        grow, shrink = data.draw(st.lists(st.integers(0, count - 1), min_size=2, max_size=2))
        if grow != shrink and value_size:
            shapes[grow] = (key, b"v" * (value_size + 1), ())
            shapes[shrink] = (key, b"v" * (value_size - 1), ())
    batch = bytearray(encode_records([(k, v, NOW, h) for k, v, h in shapes], now_ms=NOW))
    assert_walks_agree(data, batch, count)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 90), st.integers(0, 140)),  # (run length, value length)
        min_size=1,
        max_size=6,
    ),
    st.data(),
)
def test_records_in_runs_of_one_size_found_at_once_agree_with_the_walk(
    runs: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Sections whose records come in runs of equal length (a producer's batch: lengths grow by
    a byte where the offset delta reaches 64 or the timestamp delta 64 ms) take the run-by-run
    start finder (``_run_starts``), falling back to the loop after short runs: for intact
    sections, mutated bytes and wrong counts, it agrees with the record-by-record walk (F-18)."""
    shapes = [(b"v" * size, NOW + delta) for run, size in runs for delta in range(run)]
    if data.draw(st.booleans()):  # timestamps spread over seconds: 1- to 3-byte deltas
        shapes = [(value, NOW + index * 37) for index, (value, _) in enumerate(shapes)]
    batch = bytearray(encode_records([(None, v, t, ()) for v, t in shapes], now_ms=NOW))
    assert_walks_agree(data, batch, len(shapes))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([64, 65, 80, 300, 8_191, 8_192, 8_300]),  # around where a varint grows
    st.integers(min_value=0, max_value=12),  # key length (0 = null key)
    st.integers(min_value=0, max_value=200),  # value length
    st.integers(min_value=0, max_value=3),  # timestamp step in ms: deltas grow a byte too
    st.data(),
)
def test_runs_around_three_byte_offset_deltas_agree_with_the_walk(
    count: int, key_size: int, value_size: int, step_ms: int, data: st.DataObject
) -> None:
    """Records of one shape change length where a varint grows a byte, offset deltas at 64
    and 8,192 included (a 1 MB batch of small records holds more than 8,192), timestamp
    deltas likewise: intact, with one record resized (runs cut short), mutated bytes and
    wrong counts, the run finder agrees with the record-by-record walk (F-18)."""
    key = b"k" * key_size if key_size else None
    shapes = [(key, b"v" * value_size)] * count
    if data.draw(st.booleans()) and value_size:  # one record longer: a run ends early
        shapes[data.draw(st.integers(0, count - 1))] = (key, b"v" * (value_size - 1))
    stamped = [(k, v, NOW + i * step_ms, ()) for i, (k, v) in enumerate(shapes)]
    batch = bytearray(encode_records(stamped, now_ms=NOW))
    assert_walks_agree(data, batch, count)


def test_a_batch_of_one_shape_is_found_without_the_record_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """10,000 records of 16-byte keys and 100-byte values (three runs: offset deltas of 1, 2
    and 3 bytes) decode without the per-record loops (the read path's hot spot)."""
    from txn_log.record import columnar_decode
    from txn_log.record.codec import decode_batch

    def refuse(*args: object) -> None:
        raise AssertionError("the records were found one by one")

    monkeypatch.setattr(columnar_decode, "_fast_starts", refuse)
    monkeypatch.setattr(columnar_decode, "_exact_starts", refuse)
    rows = [(b"%016d" % i, b"%0100d" % i, NOW, ()) for i in range(10_000)]
    decoded = decode_batch(encode_records(rows, now_ms=NOW, base_offset=5)).records
    assert decoded.column("key").to_pylist() == [key for key, _, _, _ in rows]
    assert decoded.column("value").to_pylist() == [value for _, value, _, _ in rows]
    assert decoded.column("offset").to_pylist() == list(range(5, 10_005))
