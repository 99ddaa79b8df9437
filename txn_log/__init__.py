"""txnlog's log engine: an embedded, multi-process, Kafka-format transactional log.

The public API, importable from here::

    from txn_log import Log, TopicPartition, IsolationLevel, ProducerFencedError

``Log.open(path)`` opens (or creates) a log directory and hands out producers
(``log.producer(transactional_id)``) and consumers (``log.consumer("read_committed")``); the
README's "Use the log from Python" walks through them. Every error the engine raises derives from
``TxnLogError`` and is exported here, grouped by what the caller must do (``txn_log.errors``):
``RetriableError``, ``AbortableError``, ``FencedError``, ``FatalError``, ``ConfigError``.

Importing ``txn_log`` stays cheap and free of cycles: the errors and ``TopicPartition`` (leaf
modules) load at once, ``Log`` and the client value types on first use (PEP 562), so a module
low in the engine that imports ``txn_log.errors`` never drags in the facade above it. The engine
never imports pyspark or confluent_kafka (DESIGN §1); pyarrow is imported lazily by the modules
that build Arrow data.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from txn_log.errors import (
    AbortableError,
    ConcurrentTransactionsError,
    ConfigError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    DuplicateSequenceError,
    ExpectedOffsetMismatchError,
    FatalError,
    FencedError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    IllegalGenerationError,
    InconsistentTopicIdError,
    InvalidConfigError,
    InvalidGroupIdError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    LogLockedError,
    LogSegmentOffsetOverflowError,
    OffsetMetadataTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PolicyViolationError,
    ProducerFencedError,
    RecordTooLargeError,
    RetriableError,
    StorageError,
    TopicAlreadyExistsError,
    TransactionAbortableError,
    TransactionalIdAuthorizationError,
    TransactionCoordinatorFencedError,
    TransactionNotVerifiedError,
    TxnLogError,
    UnknownMemberIdError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from txn_log.topic_partition import TopicPartition

if TYPE_CHECKING:
    from txn_log.consumer.consumer import ConsumerRecord
    from txn_log.consumer.read_committed import IsolationLevel
    from txn_log.group.group_offsets import OffsetAndMetadata
    from txn_log.log import Log
    from txn_log.producer.producer import RecordMetadata
    from txn_log.storage.delete_records import DeleteRecordsResult

_LAZY = {
    "Log": "txn_log.log",
    "IsolationLevel": "txn_log.consumer.read_committed",
    "OffsetAndMetadata": "txn_log.group.group_offsets",
    "ConsumerRecord": "txn_log.consumer.consumer",
    "RecordMetadata": "txn_log.producer.producer",
    "DeleteRecordsResult": "txn_log.storage.delete_records",
}
"""Exports loaded on first use, by the module that defines them."""

__all__ = [  # the client API, then every error of txn_log.errors (sorted)
    "AbortableError",
    "ConcurrentTransactionsError",
    "ConfigError",
    "ConsumerRecord",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "DeleteRecordsResult",
    "DuplicateSequenceError",
    "ExpectedOffsetMismatchError",
    "FatalError",
    "FencedError",
    "FencedInstanceIdError",
    "GroupIdNotFoundError",
    "GroupNotEmptyError",
    "IllegalGenerationError",
    "InconsistentTopicIdError",
    "InvalidConfigError",
    "InvalidGroupIdError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "IsolationLevel",
    "Log",
    "LogLockedError",
    "LogSegmentOffsetOverflowError",
    "OffsetAndMetadata",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
    "ProducerFencedError",
    "RecordMetadata",
    "RecordTooLargeError",
    "RetriableError",
    "StorageError",
    "TopicAlreadyExistsError",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionNotVerifiedError",
    "TransactionalIdAuthorizationError",
    "TxnLogError",
    "UnknownMemberIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
]


if not TYPE_CHECKING:  # type checkers see the imports above, and a typo stays an error

    def __getattr__(name: str) -> Any:
        """Load a lazy export on first use (PEP 562) and keep it as a module attribute.

        Thread-safe: the import system serialises the module import; at worst two threads
        store the same object."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'txn_log' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
