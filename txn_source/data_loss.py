"""Data loss: offsets a query still had to read that the log no longer holds (retention deleted
them, or a topic was deleted or recreated).

With ``failOnDataLoss=true`` (the default, as in Spark's Kafka source) the query fails with a
message saying what was lost and how to carry on; with ``false`` it logs a warning and skips to
what is still there.
"""

from __future__ import annotations

import logging

from txn_log.errors import OffsetOutOfRangeError

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
