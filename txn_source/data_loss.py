"""Data loss: offsets a query still had to read that the log no longer holds (retention deleted
them, or a topic was deleted or recreated).

With ``failOnDataLoss=true`` (the default, as in Spark's Kafka source) the query fails with a
message saying what was lost and how to carry on; with ``false`` it logs a warning and skips to
what is still there.

One rule for the driver and the executors (DESIGN §6): the driver applies it when it
plans a batch (``planning``), an executor again when it reads a task planned earlier
(``partition``), since retention or a topic deletion may happen in between. Both cut a range
with ``readable_range`` and report a vanished partition with ``report_partition_gone``, so the
same loss reads the same wherever it is noticed.
"""

from __future__ import annotations

import logging

from offsets.offset_range import OffsetRange
from txn_log.errors import OffsetOutOfRangeError
from txn_log.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because it is not in the log any more: retention "
    "(retention.ms / retention.bytes) deleted it, or the topic was deleted, before the query "
    "read it. If you want the query to skip lost data instead of failing, set the source "
    "option 'failOnDataLoss' to 'false'."
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because it is not in the log any more. The query goes on "
    "with what is left because the source option 'failOnDataLoss' is 'false'; set it to "
    "'true' to make such a loss fail the query."
)


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    """Raise OffsetOutOfRangeError (``failOnDataLoss=true``), else log a warning."""
    if fail_on_data_loss:
        raise OffsetOutOfRangeError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    logger.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


def readable_range(
    planned: OffsetRange, *, log_start: int, log_end: int, fail_on_data_loss: bool
) -> OffsetRange:
    """The part of ``planned`` that the log ``[log_start, log_end)`` still holds.

    Offsets below the log start were deleted (retention); a planned end past the log end means
    the log was truncated or its topic re-created. Each loss is reported (``report_data_loss``:
    raised or logged). The result never inverts (start ≤ end): a range with nothing left is
    empty, and reads nothing.
    """
    tp, start, end = planned.topic_partition, planned.start, planned.end
    if start < log_start:
        report_data_loss(
            fail_on_data_loss,
            f"offsets [{start}, {min(log_start, end)}) of {tp} were deleted before they were "
            f"read; the log now starts at {log_start}",
        )
        start = min(log_start, end)
    if end > log_end:
        report_data_loss(
            fail_on_data_loss,
            f"{tp} ends at {log_end}, before the planned end {end}; the log was truncated or "
            "its topic re-created",
        )
        end = max(log_end, start)
    return OffsetRange(tp, start, end)


def report_partition_gone(
    fail_on_data_loss: bool,
    topic_partition: TopicPartition,
    start: int,
    end: int | None = None,
    *,
    cause: str = "its topic was deleted",
) -> None:
    """Report that ``topic_partition`` no longer exists while offsets ``[start, end)`` (from
    ``start`` on when the end is not known) were still to be read."""
    unread = f"offsets [{start}, {end})" if end is not None else f"offsets from {start} on"
    report_data_loss(
        fail_on_data_loss, f"{topic_partition} is gone ({cause}) before {unread} were read"
    )
