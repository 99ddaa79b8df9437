"""The server's group coordinator as the engine's ``GroupMembership`` (KIP-447, O-02).

The engine's transactional offset commit asks its membership authority, under the transaction
coordinator's lock and before it appends, whether the committing member may commit
(``coordinator.transactional_append.txn_offset_commit``). That call runs on a worker thread,
while the groups live on the server's event loop, which changes them without locks; so the
check is sent to the loop and waited for: it reads the group exactly as the loop's own
handlers see it, never half-way through a rebalance step. The loop never waits for the
coordinator's lock (every engine call runs on a worker thread), so the wait cannot deadlock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from txn_log.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    RetriableError,
    TxnLogError,
    UnknownMemberIdError,
)
from txn_log.group.group_membership import GroupMember
from txn_wire.group_coordinator import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    UNKNOWN_MEMBER_ID,
    GroupCoordinator,
)

CHECK_TIMEOUT_S = 30.0
_ERRORS: dict[int, type[TxnLogError]] = {
    UNKNOWN_MEMBER_ID: UnknownMemberIdError,
    ILLEGAL_GENERATION: IllegalGenerationError,
    FENCED_INSTANCE_ID: FencedInstanceIdError,
}


class LoopMembership:
    """``groups``' commit check, run on ``loop`` for a caller on another thread."""

    def __init__(self, groups: GroupCoordinator, loop: asyncio.AbstractEventLoop) -> None:
        self._groups = groups
        self._loop = loop

    def check_txn_offset_commit(self, group_id: str, member: GroupMember | None) -> None:
        member = member or GroupMember()
        answer: concurrent.futures.Future[int] = concurrent.futures.Future()

        def check() -> None:
            code = self._groups.check_commit(
                group_id,
                member.member_id,
                member.generation_id,
                transactional=True,
                instance_id=member.group_instance_id,
            )
            answer.set_result(code)

        try:
            self._loop.call_soon_threadsafe(check)
            code = answer.result(CHECK_TIMEOUT_S)
        except (RuntimeError, concurrent.futures.TimeoutError) as unanswered:  # closed, stuck
            raise RetriableError(
                f"group {group_id!r}: the group coordinator did not answer ({unanswered!r}); retry"
            ) from unanswered
        if code != NONE:
            refusal = _ERRORS.get(code, IllegalGenerationError)
            raise refusal(
                f"group {group_id!r}: member {member.member_id!r} of generation "
                f"{member.generation_id} may not commit offsets now (error {code}: a rebalance "
                "gave its partitions to another member, KIP-447); nothing was written"
            )
