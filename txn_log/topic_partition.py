"""``TopicPartition``: the name of one partition of one topic."""

from __future__ import annotations

from dataclasses import dataclass

from txn_log.errors import InvalidPartitionsError


@dataclass(frozen=True, order=True)
class TopicPartition:
    """An immutable (topic, partition) pair; ``str()`` gives Kafka's ``topic-partition`` form."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not isinstance(self.partition, int) or isinstance(self.partition, bool):
            raise InvalidPartitionsError(
                f"partition of topic {self.topic!r} must be an int, got {self.partition!r}"
            )
        if self.partition < 0:
            raise InvalidPartitionsError(
                f"partition {self.partition} of topic {self.topic!r} is negative"
            )

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def directory_name(self) -> str:
        """The partition's directory under the log directory (Kafka naming)."""
        return f"{self.topic}-{self.partition}"
