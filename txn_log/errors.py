"""Every error the package raises, grouped by what the caller must do (STYLE item 7, DESIGN §7).

    TxnLogError                      root of everything txnlog raises
    ├── RetriableError               try the same call again (after a back-off)
    ├── AbortableError               abort the current transaction, then carry on
    ├── FencedError                  this producer instance is a zombie: stop using it
    ├── FatalError                   the data or the call is broken: stop
    │   └── CorruptRecordError       bytes on disk or on input fail their checks
    └── ConfigError                  bad option, topic name or config: fix the call

Leaves mirror Kafka's errors and carry Kafka's numeric code (``code``; ``None`` where Kafka has
none, as for KIP-27's never-shipped offset mismatch). Messages name the topic, partition, offset
or producer involved and, for bad input, what would be valid.
"""

from __future__ import annotations

from typing import ClassVar


class TxnLogError(Exception):
    """Root of every error txnlog raises."""

    code: ClassVar[int | None] = None
    retriable: ClassVar[bool] = False


# --- by what the caller must do -----------------------------------------------------------------


class RetriableError(TxnLogError):
    """A transient condition: the same call may succeed later."""

    retriable = True


class AbortableError(TxnLogError):
    """The current transaction cannot commit: abort it and start a new one."""


class FencedError(TxnLogError):
    """A newer instance owns this producer id or transactional id: this one must stop."""


class FatalError(TxnLogError):
    """The call or the data is broken beyond retry."""


class ConfigError(TxnLogError, ValueError):
    """A bad option, config value or name; the message says what is valid."""


# --- leaves (Kafka names and codes) -------------------------------------------------------------


class CorruptRecordError(FatalError):
    """CORRUPT_MESSAGE (2): a batch fails its length, magic or CRC-32C check."""

    code = 2


class UnsupportedCompressionTypeError(CorruptRecordError):
    """UNSUPPORTED_COMPRESSION_TYPE (76): a batch names a codec this build cannot read."""

    code = 76


class OffsetOutOfRangeError(FatalError):
    """OFFSET_OUT_OF_RANGE (1): an offset below the log start or past the log end."""

    code = 1


class UnknownTopicOrPartitionError(ConfigError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""

    code = 3


class UnknownTopicIdError(UnknownTopicOrPartitionError):
    """UNKNOWN_TOPIC_ID (100): the partition this process had open was deleted with its topic.

    A write into it would land in a deleted file: it is refused, never acknowledged.
    """

    code = 100


class InconsistentTopicIdError(UnknownTopicOrPartitionError):
    """INCONSISTENT_TOPIC_ID (103): the topic was deleted and re-created under the same name;
    the partition this process had open belongs to the deleted one (a new topic id now)."""

    code = 103


class InvalidTopicError(ConfigError):
    """INVALID_TOPIC_EXCEPTION (17): a topic name outside Kafka's rule."""

    code = 17


class TopicAlreadyExistsError(ConfigError):
    """TOPIC_ALREADY_EXISTS (36)."""

    code = 36


class InvalidPartitionsError(ConfigError):
    """INVALID_PARTITIONS (37)."""

    code = 37


class InvalidConfigError(ConfigError):
    """INVALID_CONFIG (40): a topic or client config key or value that is not valid."""

    code = 40


class PolicyViolationError(ConfigError):
    """POLICY_VIOLATION (44): the topic's configuration forbids the request, e.g. deleting
    records of a topic whose ``cleanup.policy`` does not name ``delete`` (Kafka's
    ``Partition.deleteRecordsOnLeader``)."""

    code = 44


class RecordTooLargeError(ConfigError):
    """MESSAGE_TOO_LARGE (10): a batch larger than the topic's ``max.message.bytes`` (F-09)."""

    code = 10


class InvalidRecordError(ConfigError):
    """INVALID_RECORD (87): a record the log refuses, e.g. a client's control batch (F-31).

    ``record_errors``: (index in the batch, why) of the records at fault when only some are
    (Kafka's ``RecordError``, Produce v8+ ``record_errors``), so that a client fails those
    records with INVALID_RECORD and the rest of the batch as sent with them; empty when the
    whole batch is at fault."""

    code = 87

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(ConfigError):
    """INVALID_TIMESTAMP (32)."""

    code = 32


class InvalidGroupIdError(ConfigError):
    """INVALID_GROUP_ID (24): an empty group id, or one over the protocol's 32,767 UTF-8 bytes."""

    code = 24


class OffsetMetadataTooLargeError(ConfigError):
    """OFFSET_METADATA_TOO_LARGE (12): offset metadata over ``offset.metadata.max.bytes``."""

    code = 12


class OutOfOrderSequenceError(FatalError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45): a sequence gap, or seq != 0 where 0 is due (P-10)."""

    code = 45


class DuplicateSequenceError(TxnLogError):
    """DUPLICATE_SEQUENCE_NUMBER (46): an older batch that is not among the last five (P-10 5).

    A retried batch that *is* among them is answered with its original offsets instead.
    """

    code = 46


class InvalidProducerEpochError(FencedError):
    """INVALID_PRODUCER_EPOCH (47): a batch or marker with an epoch older than the stored one."""

    code = 47


class ProducerFencedError(FencedError):
    """PRODUCER_FENCED (90): a newer instance bumped the epoch of this transactional id."""

    code = 90


class TransactionCoordinatorFencedError(FencedError):
    """TRANSACTION_COORDINATOR_FENCED (52): a marker with a stale coordinator epoch (C-23)."""

    code = 52


class InvalidTxnStateError(FatalError):
    """INVALID_TXN_STATE (48): the call is not allowed in the transaction's current state."""

    code = 48


class TransactionNotVerifiedError(InvalidTxnStateError):
    """INVALID_TXN_STATE (48): a transactional batch would start a transaction in a partition
    without the coordinator having verified that the producer's ongoing transaction includes
    the partition (KIP-890 part 1). The coordinator's verified append
    (``coordinator.transactional_append``) is the one path that may start one."""


class TransactionalIdAuthorizationError(FatalError):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): a transactional write without a
    transactional id (KafkaApis refuses such a produce whole), or one the principal may not
    write."""

    code = 53


class IllegalGenerationError(FencedError):
    """ILLEGAL_GENERATION (22): an offset commit from a member of an older generation of its
    group (KIP-447: a zombie whose partitions a rebalance gave to another member)."""

    code = 22


class UnknownMemberIdError(FencedError):
    """UNKNOWN_MEMBER_ID (25): an offset commit from a member the group does not know (it was
    removed, or the group has members and the commit names none)."""

    code = 25


class FencedInstanceIdError(FencedError):
    """FENCED_INSTANCE_ID (82): a static member's group.instance.id now belongs to another
    member id (KIP-345)."""

    code = 82


class GroupNotEmptyError(FatalError):
    """GROUP_NOT_EMPTY (68): a group's offsets may be reset or deleted only while it has no
    members (``group_activity``); stop its consumers, or wait for their session timeout, then
    call again."""

    code = 68


class GroupIdNotFoundError(ConfigError):
    """GROUP_ID_NOT_FOUND (69): no group of that id holds committed offsets."""

    code = 69


class InvalidProducerIdMappingError(FatalError):
    """INVALID_PRODUCER_ID_MAPPING (49): no or another producer id for this transactional id."""

    code = 49


class InvalidTransactionTimeoutError(ConfigError):
    """INVALID_TRANSACTION_TIMEOUT (50): outside 1 .. ``transaction.max.timeout.ms``."""

    code = 50


class ConcurrentTransactionsError(RetriableError):
    """CONCURRENT_TRANSACTIONS (51): the previous transaction is still completing (E-10)."""

    code = 51


class ExpectedOffsetMismatchError(AbortableError):
    """KIP-27 conditional publish: the batch's expected offset is not the log end (E-17, K-04).

    KIP-27 never shipped, so Kafka has no code for it.
    """

    code = None


class TransactionAbortableError(AbortableError):
    """TRANSACTION_ABORTABLE (120, KIP-1050): a send, flush or offset commit of the current
    transaction failed, so it may lack a record; the producer allows only
    ``abort_transaction()`` (then a new transaction) until it is aborted.

    Raised by every other call of a producer in that state, chained (``__cause__``) to the
    error that failed the transaction: Kafka's TransactionManager ABORTABLE_ERROR state.
    """

    code = 120


class LogLockedError(RetriableError):
    """A partition or coordinator lock could not be taken in time."""


class StorageError(FatalError):
    """A write or fsync failed; the writer must not retry it (a failed fsync is fatal)."""


class CorruptSnapshotError(CorruptRecordError):
    """A producer-state snapshot fails its version, length or CRC-32C check (P-21, STYLE 6).

    The producer state manager deletes the file and falls back to the previous snapshot, and
    finally to replaying the log from its start (P-24).
    """


class CorruptIndexError(FatalError):
    """An index file (``.index``, ``.timeindex``, ``.txnindex``) fails its sanity check.

    Kafka's ``CorruptIndexException``: recovery rebuilds the offset and time indexes from the log.
    """


class InvalidOffsetError(FatalError):
    """An index or segment append whose offset does not move forward.

    Kafka's ``InvalidOffsetException``.
    """


class LogSegmentOffsetOverflowError(FatalError):
    """An offset or file position that does not fit a segment's int32 index fields: roll a segment.

    Kafka's ``LogSegmentOffsetOverflowException``.
    """
