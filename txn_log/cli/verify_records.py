"""``txnlog verify``'s checks of the records of the internal topics: each must decode as the
coordinators decode it (C-05/C-06 for ``__transaction_state``, the offset-commit layout for
``__consumer_offsets``, O-01). One foreign record there breaks every process that reads the
topic, and verify never deletes records, so such a problem is never repairable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from txn_log.cli.internal_records import DECODE_ERRORS, DECODERS
from txn_log.record.batch_header import BatchHeader
from txn_log.record.batch_records import check_records as check_stored_records
from txn_log.record.codec import Record, iter_records
from txn_log.record.compression import MAX_RECORDS_BYTES
from txn_log.storage.replay import read_control_record
from txn_log.topic_config import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC


@dataclass(frozen=True)
class Problem:
    """One problem: the file, the byte position in it, what is wrong, whether repair fixes it."""

    file: str
    position: int
    problem: str
    repairable: bool


# --- records of the internal topics -----------------------------------------------------------

RecordCheck = Callable[[Record], object]
"""Decode one record as its readers do; raises when they would fail on it."""


_RECORD_CHECKS: dict[str, tuple[RecordCheck, str]] = {
    TRANSACTION_STATE_TOPIC: (
        DECODERS[TRANSACTION_STATE_TOPIC],
        "init_transactions(), commits and read_committed reads fail on it in every process",
    ),
    CONSUMER_OFFSETS_TOPIC: (
        DECODERS[CONSUMER_OFFSETS_TOPIC],
        "committed() fails on it in every process",
    ),
}


def check_records(
    topic: str, path: Path, position: int, header: BatchHeader, batch: memoryview
) -> list[Problem]:
    """Problems of the records of one batch of an internal topic (none elsewhere).

    The coordinator decodes every batch of its state log, so a control batch (a COMMIT or
    ABORT marker) there is a problem too. Markers belong in ``__consumer_offsets``
    (transactional offset commits, O-04); its reader parses each as one control record.
    """
    found = _RECORD_CHECKS.get(topic)
    if found is None:
        return _data_batch_problems(path, position, header, batch)
    check, consequence = found
    if header.is_control and topic == TRANSACTION_STATE_TOPIC:
        message = (
            f"a transaction marker (control batch) at offset {header.base_offset} of {topic}, "
            f"which holds no transactions; {consequence} (verify never deletes records)"
        )
        return [Problem(str(path), position, message, False)]
    if header.is_control:
        try:
            read_control_record(header, batch)
        except DECODE_ERRORS as error:
            message = f"control batch at offset {header.base_offset} of {topic}: {error}"
            return [Problem(str(path), position, f"{message}; {consequence}", False)]
        return []
    problems = []
    try:
        for record in iter_records(batch):
            try:
                check(record)
            except DECODE_ERRORS as error:
                problems.append(
                    Problem(
                        str(path),
                        position,
                        f"record at offset {record.offset} of {topic} does not decode: {error}; "
                        f"{consequence} (verify never deletes records)",
                        False,
                    )
                )
    except DECODE_ERRORS as error:
        problems.append(
            Problem(str(path), position, f"records of the batch do not decode: {error}", False)
        )
    return problems


def _data_batch_problems(
    path: Path, position: int, header: BatchHeader, batch: memoryview
) -> list[Problem]:
    """A user topic's data batch: its records must decode as the validator let them in
    (``batch_records``, DESIGN §4), within the inflation limit readers apply; a batch that
    fails here stops every reader of the partition at its offset."""
    if header.is_control:
        return []
    try:
        check_stored_records(bytes(batch), header, MAX_RECORDS_BYTES, stored=True)
    except DECODE_ERRORS as error:
        message = (
            f"records of the batch at offset {header.base_offset} do not decode: {error}; "
            "readers of the partition stop at it (verify never deletes records)"
        )
        return [Problem(str(path), position, message, False)]
    return []
