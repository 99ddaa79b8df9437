"""The engine's public API is importable from the package root (issue 13): ``from txn_log
import Log, TopicPartition, ...``, each name the very object its module defines, and the error
classes a user catches, grouped as in ``txn_log.errors`` (what the caller must do)."""

from __future__ import annotations

import subprocess
import sys

import txn_log
from txn_log import errors

CLIENT_API = {
    "Log": "txn_log.log",
    "TopicPartition": "txn_log.topic_partition",
    "IsolationLevel": "txn_log.consumer.read_committed",
    "OffsetAndMetadata": "txn_log.group.group_offsets",
    "ConsumerRecord": "txn_log.consumer.consumer",
    "RecordMetadata": "txn_log.producer.producer",
    "DeleteRecordsResult": "txn_log.storage.delete_records",
}
ERRORS = [  # and every other class of txn_log.errors
    # the roots: what the caller must do
    "TxnLogError",
    "RetriableError",
    "AbortableError",
    "FencedError",
    "FatalError",
    "ConfigError",
    # the leaves a user of the producer, consumer and topics meets
    "ProducerFencedError",
    "InvalidProducerEpochError",
    "TransactionAbortableError",
    "ConcurrentTransactionsError",
    "InvalidTxnStateError",
    "InvalidTransactionTimeoutError",
    "OutOfOrderSequenceError",
    "OffsetOutOfRangeError",
    "UnknownTopicOrPartitionError",
    "UnknownTopicIdError",
    "InconsistentTopicIdError",
    "InvalidTopicError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidConfigError",
    "PolicyViolationError",
    "RecordTooLargeError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidGroupIdError",
    "OffsetMetadataTooLargeError",
    "CorruptRecordError",
    "StorageError",
    "LogLockedError",
]


def test_the_client_api_is_exported_from_the_package_root() -> None:
    import importlib

    for name, module in CLIENT_API.items():
        assert getattr(txn_log, name) is getattr(importlib.import_module(module), name), name
    from txn_log import ConsumerRecord, IsolationLevel, Log, OffsetAndMetadata, TopicPartition

    assert Log.open and TopicPartition("t", 0).partition == 0
    assert IsolationLevel.parse("read_committed") is IsolationLevel.READ_COMMITTED
    assert OffsetAndMetadata(5).offset == 5 and ConsumerRecord.__name__ == "ConsumerRecord"


def test_the_errors_users_catch_are_exported_and_all_lists_every_export() -> None:
    for name in ERRORS:
        assert getattr(txn_log, name) is getattr(errors, name), name
        assert issubclass(getattr(txn_log, name), txn_log.TxnLogError)
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.TxnLogError)
    }
    missing = defined - set(txn_log.__all__)
    assert not missing, f"add these errors to txn_log/__init__.py and its __all__: {missing}"
    assert sorted(txn_log.__all__) == sorted({*CLIENT_API, *defined})
    assert set(ERRORS) <= defined
    assert set(txn_log.__all__) <= set(dir(txn_log))


def test_star_import_gives_the_public_api() -> None:
    code = "from txn_log import *; print(Log.__module__, ProducerFencedError.__mro__[1].__name__)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["txn_log.log", "FencedError"], result.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        txn_log.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("txn_log.NoSuchThing did not raise")
