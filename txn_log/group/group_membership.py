"""Who may commit a group's offsets: a member's identity in its group (KIP-447, O-02).

Kafka's ``ConsumerGroupMetadata`` travels with a transactional offset commit
(``send_offsets_to_transaction(offsets, consumer.group_metadata())``) so that the group
coordinator can fence a zombie: a consume-transform-produce instance whose partitions a
rebalance gave to another member, and which commits with its old generation, must not commit
(its output would be duplicated by the new owner's). The embedded log has no group membership
(its consumers read partitions directly); ``txnlog serve``'s group coordinator has, and it is
the ``GroupMembership`` authority the engine's transactional offset commit consults
(``coordinator.transactional_append.txn_offset_commit``), under the coordinator's lock, before
it appends anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

NO_GENERATION = -1
NO_MEMBER_ID = ""


@dataclass(frozen=True)
class GroupMember:
    """A consumer's group metadata as Kafka's clients send it: ``generation_id`` -1 and an
    empty ``member_id`` when the client has none (a standalone consumer, an old client)."""

    member_id: str = NO_MEMBER_ID
    generation_id: int = NO_GENERATION
    group_instance_id: str | None = None

    @property
    def is_anonymous(self) -> bool:
        """No member id, generation or instance id: Kafka skips the membership checks of a
        transactional commit then (older clients send none)."""
        return (
            self.generation_id < 0
            and self.member_id == NO_MEMBER_ID
            and self.group_instance_id is None
        )


class GroupMembership(Protocol):
    """The authority over a group's members and generations (the wire server's group
    coordinator)."""

    def check_txn_offset_commit(self, group_id: str, member: GroupMember | None) -> None:
        """Raise UnknownMemberIdError, IllegalGenerationError or FencedInstanceIdError (the
        engine's errors with Kafka's codes) unless ``member`` may commit ``group_id``'s
        offsets now; None or an anonymous member may, as in Kafka."""
