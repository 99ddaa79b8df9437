"""Where a read may start: the one "offset outside the log" rule.

A read may start at any offset from the log start (inclusive: the first offset retention
kept) to the log end (inclusive: reading at the end returns nothing yet, as Kafka's fetch at
the high watermark does). Anything else is ``OffsetOutOfRangeError``, whose message names the
partition and the valid range ``[log start, log end]``, whichever reader refused it: the
partition log's ``read`` and ``check_offset`` (``txnlog dump --from``) and the consumer.
"""

from __future__ import annotations

from txn_log.errors import OffsetOutOfRangeError
from txn_log.topic_partition import TopicPartition


def check_offset_in_log(
    topic_partition: TopicPartition, offset: int, log_start_offset: int, log_end_offset: int
) -> None:
    """Raise OffsetOutOfRangeError unless ``log_start_offset ≤ offset ≤ log_end_offset``."""
    if not log_start_offset <= offset <= log_end_offset:
        raise OffsetOutOfRangeError(
            f"{topic_partition}: offset {offset} is outside the log "
            f"[{log_start_offset}, {log_end_offset}]"
        )
