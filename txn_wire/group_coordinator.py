"""The classic consumer group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups): membership and rebalances in memory, offsets in the engine's
group store (``transactions``: OffsetCommit / OffsetFetch).

A group moves through Kafka's states (``GroupState``): EMPTY → PREPARING_REBALANCE (a member
joined, left, or timed out: every member must join again) → COMPLETING_REBALANCE (the join
round closed: a new generation, the leader got every member's subscription) → STABLE (the
leader's SyncGroup gave every member its assignment). A join round closes when every known
member has joined again, or when the rebalance timeout passes (members that did not rejoin
are removed). A member that sends no heartbeat within its session timeout is removed and the
group rebalances; the session does not run while the member waits on the coordinator (parked
in a JoinGroup or a SyncGroup, where it cannot heartbeat: Kafka's ``hasSatisfiedHeartbeat``),
and the join or sync answer that ends the wait starts it afresh (Kafka's
``completeAndScheduleNextHeartbeatExpiration``), so a round held open longer than the session,
by the initial delay for one, expires nobody (librdkafka 0102). Errors are Kafka's:
UNKNOWN_MEMBER_ID (25), ILLEGAL_GENERATION (22), REBALANCE_IN_PROGRESS (27),
MEMBER_ID_REQUIRED (79, KIP-394: JoinGroup v4+ first gets an id), INVALID_SESSION_TIMEOUT
(26: a session timeout outside group.min/max.session.timeout.ms).
Each new generation records what its members subscribe to (``Group.subscribed_topics``, read
from their metadata by ``consumer_protocol``, as Kafka's ``computeSubscribedTopics``), which
OffsetDelete consults (``offset_delete``).

What a member may do is Kafka's (``validateCurrentMember``, ``supportsProtocols``): a call
naming an instance id that belongs to no member is UNKNOWN_MEMBER_ID (a member cannot take an
instance id by naming it); a JoinGroup offering no protocol that every member supports is
INCONSISTENT_GROUP_PROTOCOL (23). An id offered with MEMBER_ID_REQUIRED is no member until it
joins with it (``Group.pending``: no heartbeat, sync or commit; a join round waits for it; it
expires after the session timeout without a rebalance). A current member joining again with
unchanged protocols once the round has closed gets the current generation back instead of a
rebalance (a client that lost its answer), unless it leads a stable group. Members that send
no SyncGroup within the rebalance timeout of the round's close are removed and the group
rebalances (``onExpirePendingSync``): a leader that never assigns cannot hold the group.

Static members (KIP-345, JoinGroup v5+): a member joining with a ``group.instance.id`` keeps
its place across restarts. Rejoining with no member id, it gets a new one in place of the old
(whose pending calls are answered FENCED_INSTANCE_ID), keeps its assignment, and, in a stable
group whose protocol it does not change, no rebalance happens: the other members keep their
partitions. Any call naming an instance id with another member id than the one it now holds
is FENCED_INSTANCE_ID (82), a zombie of an earlier start. A static member leaves by its
session timeout or an explicit LeaveGroup v3+ naming its instance id; a join round that closes
without it keeps it (the leader assigns it as if present).

An empty group's first join round is held open (Kafka's ``InitialDelayedJoin``,
group.initial.rebalance.delay.ms, 3 s by default): it closes once a delay passes with no new
member joining, each newcomer buying another delay, all within the rebalance timeout; so the
members of a starting application form one generation instead of each newcomer taking
partitions from the members before it.

Membership is not persisted (a restarted server starts with empty groups; members rejoin on
UNKNOWN_MEMBER_ID, as after a coordinator move in Kafka). That a group has members is
published to the other processes of the directory through the engine's ``GroupActivity``
(``txn_log.group.group_activity``): a shared lock on the group's lock file from its first
member until it is empty again, so that ``txnlog groups reset-offsets`` and ``delete`` in
another process refuse a live group. A tool holding the group inactive makes the first
member's JoinGroup COORDINATOR_LOAD_IN_PROGRESS (14, which clients retry after a back-off)
until it is done; the lock is taken without waiting, so the event loop never blocks on it.
Runs on the server's event loop only: no locks; the waits (a join round, a follower's
SyncGroup) are futures.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field

from txn_log.group.group_activity import GroupActivity
from txn_wire.broker import (
    DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
    DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
    DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
)
from txn_wire.codec import Plain, Request
from txn_wire.consumer_protocol import subscribed_topics

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
INVALID_SESSION_TIMEOUT = 26
INCONSISTENT_GROUP_PROTOCOL = 23
MEMBER_ID_REQUIRED = 79
GROUP_ID_NOT_FOUND = 69
FENCED_INSTANCE_ID = 82
SESSION_CHECK_INTERVAL_S = 0.1


CLASSIC_GROUP_TYPE = "classic"
"""The one group protocol served here (KIP-848's "consumer" groups are not)."""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_heartbeat: float
    assignment: bytes = b""
    join: asyncio.Future[Plain] | None = None
    sync: asyncio.Future[Plain] | None = None
    group_instance_id: str | None = None  # a static member's (KIP-345)


@dataclass
class Group:
    group_id: str
    protocol_type: str = ""
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    round_deadline: asyncio.TimerHandle | None = None
    initial_delay: bool = False  # the first join round of an empty group is held open
    new_member_added: bool = False  # a member joined since the initial delay last ran out
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, float] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED and not yet joined with (KIP-394),
    each with the loop time its offer expires: not members (no heartbeat, sync or commit),
    but a join round waits for them, as Kafka's ``pendingMembers``."""
    awaiting_sync: set[str] = field(default_factory=set)
    """Members of the current generation that have sent no SyncGroup yet."""
    sync_deadline: asyncio.TimerHandle | None = None
    subscribed_topics: frozenset[str] | None = None
    """What the members subscribe to, as of the current generation (None: unknown, which
    OffsetDelete counts as every topic of a consumer group: ``consumer_protocol``)."""

    def is_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """Whether ``instance_id`` now belongs to another member than ``member_id``."""
        holder = self.static_members.get(instance_id) if instance_id is not None else None
        return holder is not None and holder != member_id

    def check_member(self, member_id: str, instance_id: str | None) -> int:
        """Whether a call naming ``member_id`` (and ``instance_id``) comes from a current
        member (Kafka's ``validateCurrentMember``): FENCED_INSTANCE_ID if the instance id
        belongs to another member, UNKNOWN_MEMBER_ID if it belongs to none (a member cannot
        take an instance id by naming it) or the member is not here, else NONE."""
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is None:
                return UNKNOWN_MEMBER_ID
            if holder != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member of ``protocol_type`` offering ``protocols`` may join (Kafka's
        ``supportsProtocols``): into an empty group, any non-empty type and list; into one
        with members, the same type and a protocol that every member supports."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(name in dict(m.protocols) for m in self.members.values()) for name in names)


class GroupCoordinator:
    """Every group of one server. Use from the server's event loop only."""

    def __init__(
        self,
        min_session_timeout_ms: int = DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
        max_session_timeout_ms: int = DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
        initial_rebalance_delay_ms: int = DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
        activity: GroupActivity | None = None,
    ) -> None:
        self.groups: dict[str, Group] = {}
        self.activity = activity
        """Where this server publishes which groups have members (None: nowhere)."""
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._expire_sessions())

    def stop(self) -> None:
        """Stop expiring sessions and answer every waiting JoinGroup / SyncGroup with
        COORDINATOR_NOT_AVAILABLE (the members look for a coordinator again)."""
        if self._reaper is not None:
            self._reaper.cancel()
        if self.activity is not None:
            self.activity.release_all()
        for group in self.groups.values():
            for member in group.members.values():
                for future in (member.join, member.sync):
                    if future is not None and not future.done():
                        future.set_result(
                            {
                                **_join_error(COORDINATOR_NOT_AVAILABLE, member.member_id),
                                "assignment": b"",
                            }
                        )

    # --- JoinGroup --------------------------------------------------------------------------

    async def join_group(self, request: Request) -> Plain:
        body = request.body
        member_id = body["member_id"]
        session_timeout = body["session_timeout"]
        if not self.min_session_timeout_ms <= session_timeout <= self.max_session_timeout_ms:
            return _join_error(INVALID_SESSION_TIMEOUT, member_id)  # before the group exists
        group = self.groups.setdefault(body["group_id"], Group(body["group_id"]))
        protocols = [(p["name"], p["metadata"]) for p in body["protocols"]]
        if not group.supports(body["protocol_type"], protocols):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        instance_id = body.get("group_instance_id")
        if member_id and instance_id is None and member_id in group.pending:
            return await self._join_new(group, member_id, None, request, protocols)  # KIP-394
        if member_id:
            error = group.check_member(member_id, instance_id)
            if error:
                return _join_error(error, member_id)
            return await self._join_current(group, group.members[member_id], request, protocols)
        if instance_id is not None and instance_id in group.static_members:
            return await self._rejoin_static(group, instance_id, request, protocols)
        member_id = f"{instance_id or request.client_id or 'member'}-{uuid.uuid4()}"
        if request.api_version >= 4 and instance_id is None:  # KIP-394 (static: KIP-345)
            expires = asyncio.get_running_loop().time() + session_timeout / 1000
            group.pending[member_id] = expires
            return _join_error(MEMBER_ID_REQUIRED, member_id)
        return await self._join_new(group, member_id, instance_id, request, protocols)

    async def _join_new(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        request: Request,
        protocols: list[tuple[str, bytes]],
    ) -> Plain:
        """A member joining for the first time (a pending id's first join included)."""
        if not group.members:
            if self.activity is not None and not self.activity.hold(group.group_id):
                return _join_error(COORDINATOR_LOAD_IN_PROGRESS, member_id)  # a tool resets it
            group.protocol_type = request.body["protocol_type"]
        group.pending.pop(member_id, None)
        member = self._add_member(group, member_id, request, protocols, awaiting=True)
        if instance_id is not None:
            member.group_instance_id = instance_id
            group.static_members[instance_id] = member_id
        return await self._join_round(group, member)

    async def _join_current(
        self, group: Group, member: Member, request: Request, protocols: list[tuple[str, bytes]]
    ) -> Plain:
        """A current member joining again (Kafka's ``doCurrentMemberJoinGroup``): a member
        whose protocols and metadata are unchanged gets the current generation back, once the
        join round has closed, without a rebalance (a client that lost its JoinGroup answer
        asks again), except the leader of a stable group, which rebalances (it may want to
        assign anew); anything else joins the round, opening one if none is open."""
        unchanged = member.protocols == protocols
        if unchanged and (
            group.state is GroupState.COMPLETING_REBALANCE
            or (group.state is GroupState.STABLE and member.member_id != group.leader)
        ):
            return _join_answer(group, member)
        member = self._add_member(group, member.member_id, request, protocols, awaiting=True)
        return await self._join_round(group, member)

    async def _rejoin_static(
        self, group: Group, instance_id: str, request: Request, protocols: list[tuple[str, bytes]]
    ) -> Plain:
        """A known static member restarting (no member id): a new member id takes the old
        one's place and assignment (Kafka's ``doStaticNewMemberJoinGroup``). A stable group
        whose protocol stays the same does not rebalance: the member gets the current
        generation, and the old leader id, so that it never assigns as a leader of a stable
        group; a group completing a rebalance starts another (the leader may have assigned
        the old id), and one preparing a rebalance takes it as a rejoin."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id, None)
        if old is None:  # never so (a mapping names a member), but must not wedge the instance
            del group.static_members[instance_id]
            new_id = f"{instance_id}-{uuid.uuid4()}"
            return await self._join_new(group, new_id, instance_id, request, protocols)
        for future in (old.join, old.sync):
            if future is not None and not future.done():
                future.set_result({**_join_error(FENCED_INSTANCE_ID, old_id), "assignment": b""})
        leader_before = group.leader
        new_id = f"{instance_id}-{uuid.uuid4()}"
        group.static_members[instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        member = self._add_member(group, new_id, request, protocols, awaiting=True)
        member.group_instance_id = instance_id
        member.assignment = old.assignment
        if group.state is GroupState.STABLE and _common_protocol(group) == group.protocol_name:
            member.join = None
            return {
                "error_code": NONE,
                "generation_id": group.generation_id,
                "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name,
                "leader": leader_before or "",
                "member_id": new_id,
                "members": [],
            }
        return await self._join_round(group, member)

    async def _join_round(self, group: Group, member: Member) -> Plain:
        """``member``'s answer from the join round it takes part in: the round is opened if
        none is, and closes at once if every member has now joined."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        join = member.join
        self._maybe_complete_join(group)
        if join is None:
            return _join_error(UNKNOWN_MEMBER_ID, member.member_id)
        return await join

    def _add_member(
        self,
        group: Group,
        member_id: str,
        request: Request,
        protocols: list[tuple[str, bytes]],
        *,
        awaiting: bool,
    ) -> Member:
        body = request.body
        loop = asyncio.get_running_loop()
        rebalance_timeout = body.get("rebalance_timeout", -1)
        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, request.client_id or "", 0, 0, protocols, loop.time())
            group.members[member_id] = member
            group.new_member_added = True
        member.session_timeout_ms = body["session_timeout"]
        member.rebalance_timeout_ms = (
            rebalance_timeout if rebalance_timeout > 0 else body["session_timeout"]
        )
        member.protocols = protocols
        member.last_heartbeat = loop.time()
        if awaiting:
            if member.join is not None and not member.join.done():
                member.join.set_result(_join_error(UNKNOWN_MEMBER_ID, member_id))
            member.join = loop.create_future()
        return member

    def _prepare_rebalance(self, group: Group) -> None:
        """Open a join round: every member must join again within the rebalance timeout. An
        empty group's round is held open for the initial delay (``_initial_delay_over``)."""
        was_empty = group.state is GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        _stop_sync_deadline(group)
        for member in group.members.values():
            if member.sync is not None and not member.sync.done():
                member.sync.set_result({"error_code": REBALANCE_IN_PROGRESS, "assignment": b""})
        timeout_ms = _rebalance_timeout_ms(group)
        if group.round_deadline is not None:
            group.round_deadline.cancel()
        loop = asyncio.get_running_loop()
        delay_ms = self.initial_rebalance_delay_ms
        if was_empty and delay_ms > 0:
            group.initial_delay = True
            group.new_member_added = False
            remaining_ms = max(timeout_ms - delay_ms, 0)
            group.round_deadline = loop.call_later(
                delay_ms / 1000, self._initial_delay_over, group, remaining_ms
            )
            return
        group.round_deadline = loop.call_later(timeout_ms / 1000, self._close_round, group)

    def _initial_delay_over(self, group: Group, remaining_ms: int) -> None:
        """Close the first round, unless a member joined during the delay and the rebalance
        timeout leaves time for another (then wait the shorter of the two)."""
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay_ms = min(self.initial_rebalance_delay_ms, remaining_ms)
            group.round_deadline = asyncio.get_running_loop().call_later(
                delay_ms / 1000, self._initial_delay_over, group, remaining_ms - delay_ms
            )
            return
        group.initial_delay = False
        self._close_round(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_delay
            and not group.pending
            and all(_parked(m.join) for m in group.members.values())
        ):
            self._close_round(group)

    def _close_round(self, group: Group) -> None:
        """End the join round: drop the dynamic members that did not rejoin, start a new
        generation. A static member that did not rejoin keeps its place (KIP-345, Kafka's
        ``onCompleteJoin``): the leader assigns it as if present, and it is removed only when
        its session or the SyncGroup deadline runs out; if no member at all rejoined, the
        round waits another rebalance timeout."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        group.initial_delay = False
        if group.round_deadline is not None:
            group.round_deadline.cancel()
            group.round_deadline = None
        for member_id, member in list(group.members.items()):
            if not _parked(member.join) and member.group_instance_id is None:
                del group.members[member_id]
        if not group.members:
            self._empty(group)
            return
        joined = [m.member_id for m in group.members.values() if _parked(m.join)]
        loop = asyncio.get_running_loop()
        if not joined:
            timeout_s = _rebalance_timeout_ms(group) / 1000
            group.round_deadline = loop.call_later(timeout_s, self._close_round, group)
            return
        group.generation_id += 1
        group.state = GroupState.COMPLETING_REBALANCE
        if group.leader not in joined:
            group.leader = joined[0]
        group.protocol_name = _common_protocol(group)
        group.subscribed_topics = subscribed_topics(
            group.protocol_type,
            group.protocol_name,
            [dict(m.protocols).get(group.protocol_name, b"") for m in group.members.values()],
        )
        now = loop.time()
        group.awaiting_sync = set(group.members)
        group.sync_deadline = loop.call_later(
            _rebalance_timeout_ms(group) / 1000, self._sync_expired, group, group.generation_id
        )
        for member in group.members.values():
            member.last_heartbeat = now  # the answer starts a new session (module docstring)
            if member.join is not None:
                member.join.set_result(_join_answer(group, member))
                member.join = None

    def _sync_expired(self, group: Group, generation_id: int) -> None:
        """The rebalance timeout passed since the join round closed: members of that
        generation that sent no SyncGroup are removed, and the group rebalances (Kafka's
        ``onExpirePendingSync``): a leader that never assigns, or a member that never asks
        for its assignment, cannot hold the group."""
        group.sync_deadline = None
        if group.generation_id != generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        late = [member_id for member_id in group.awaiting_sync if member_id in group.members]
        group.awaiting_sync = set()
        for member_id in late:
            if member_id in group.members:
                self._remove(group, member_id)

    def _empty(self, group: Group) -> None:
        if self.activity is not None:
            self.activity.release(group.group_id)
        group.state = GroupState.EMPTY
        _stop_sync_deadline(group)
        group.leader = None
        group.protocol_name = None
        group.subscribed_topics = subscribed_topics(group.protocol_type, None, [])
        group.generation_id += 1

    # --- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------

    async def sync_group(self, request: Request) -> Plain:
        body = request.body
        group, member, error = self._member(
            body["group_id"],
            body["member_id"],
            body["generation_id"],
            body.get("group_instance_id"),
        )
        if error or member is None:
            return {"error_code": error or UNKNOWN_MEMBER_ID, "assignment": b""}
        group.awaiting_sync.discard(member.member_id)
        if not group.awaiting_sync:
            _stop_sync_deadline(group)
        if group.state is GroupState.STABLE:
            member.last_heartbeat = asyncio.get_running_loop().time()
            return {"error_code": NONE, "assignment": member.assignment}
        if member.member_id == group.leader:
            assignments = {a["member_id"]: a["assignment"] for a in body["assignments"]}
            group.state = GroupState.STABLE
            now = asyncio.get_running_loop().time()
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
                other.last_heartbeat = now  # as a join answer, a sync answer starts a session
                if other.sync is not None and not other.sync.done():
                    other.sync.set_result({"error_code": NONE, "assignment": other.assignment})
                other.sync = None
            return {"error_code": NONE, "assignment": member.assignment}
        member.sync = asyncio.get_running_loop().create_future()
        return await member.sync

    def heartbeat(self, request: Request) -> Plain:
        body = request.body
        _, member, error = self._member(
            body["group_id"],
            body["member_id"],
            body["generation_id"],
            body.get("group_instance_id"),
        )
        if member is not None:
            member.last_heartbeat = asyncio.get_running_loop().time()
        return {"error_code": error}

    def leave_group(self, request: Request) -> Plain:
        body = request.body
        leaving = body.get("members") or [{"member_id": body.get("member_id", "")}]
        group = self.groups.get(body["group_id"])
        results = []
        for entry in leaving:
            member_id, instance_id = entry["member_id"], entry.get("group_instance_id")
            if group is not None and not member_id and instance_id in group.static_members:
                member_id = group.static_members[instance_id]  # a static member leaving by name
            if group is None:
                code = UNKNOWN_MEMBER_ID
            elif instance_id is None and member_id in group.pending:
                del group.pending[member_id]  # never joined: nothing to rebalance
                self._maybe_complete_join(group)
                code = NONE
            else:
                code = group.check_member(member_id, instance_id)
                if code == NONE:
                    self._remove(group, member_id)
            results.append(
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            )
        if request.api_version >= 3:
            return {"error_code": NONE, "members": results}
        return {"error_code": results[0]["error_code"]}

    def check_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        transactional: bool = False,
        instance_id: str | None = None,
    ) -> int:
        """Who may commit a group's offsets (Kafka's ``validateOffsetCommit``, KIP-447):

        - a commit naming a member or a generation must come from a current member of the
          current generation: UNKNOWN_MEMBER_ID for a member the group does not hold (a
          zombie removed by a rebalance, or any member of a group that has none),
          ILLEGAL_GENERATION for an older or newer generation; a plain commit while the
          group waits for its leader's assignment is REBALANCE_IN_PROGRESS (the member
          commits again once it has it); while members rejoin, the current generation may
          still commit (what a consumer commits on revocation);
        - an anonymous commit (generation -1, no member id: a standalone consumer, or an old
          client's transactional commit) is allowed, except a plain one into a group that has
          members (UNKNOWN_MEMBER_ID: only members commit a live group's offsets);
        - a commit naming a static member's instance id with another member id than the one
          the instance now holds is FENCED_INSTANCE_ID (KIP-345)."""
        group = self.groups.get(group_id)
        if group is not None and group.is_fenced(instance_id, member_id):
            return FENCED_INSTANCE_ID
        if generation_id >= 0 or member_id:
            if group is None:
                return UNKNOWN_MEMBER_ID
            error = group.check_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return ILLEGAL_GENERATION
            if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
                return REBALANCE_IN_PROGRESS
            return NONE
        if not transactional and group is not None and group.members:
            return UNKNOWN_MEMBER_ID
        return NONE

    def _member(
        self, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None
    ) -> tuple[Group, Member | None, int]:
        group = self.groups.get(group_id) or Group(group_id)
        error = group.check_member(member_id, instance_id)
        if error:
            return group, None, error
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return group, member, REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return group, member, ILLEGAL_GENERATION
        return group, member, NONE

    def _remove(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id)
        group.awaiting_sync.discard(member_id)
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        for future in (member.join, member.sync):
            if future is not None and not future.done():
                future.set_result(_join_error(UNKNOWN_MEMBER_ID, member_id))
        if not group.members:
            if group.round_deadline is not None:
                group.round_deadline.cancel()
            self._empty(group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group)

    async def _expire_sessions(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL_S)
            now = loop.time()
            for group in list(self.groups.values()):
                for member_id, expires in list(group.pending.items()):
                    if now >= expires:  # offered an id, never joined with it: no rebalance
                        del group.pending[member_id]
                        self._maybe_complete_join(group)
                for member_id, member in list(group.members.items()):
                    if _parked(member.join) or _parked(member.sync):
                        continue  # parked in a JoinGroup or SyncGroup: it cannot heartbeat
                    if now - member.last_heartbeat > member.session_timeout_ms / 1000:
                        self._remove(group, member_id)
                if _forgettable(group):
                    del self.groups[group.group_id]  # a name any JoinGroup can make: not kept

    # --- DescribeGroups, ListGroups ------------------------------------------------------------

    def describe_groups(self, request: Request, with_offsets: Collection[str] = ()) -> Plain:
        """Each group asked for: its state and members; a group without members is Empty if
        it holds committed offsets (``with_offsets``), else Dead (unknown), as Kafka answers."""
        described = []
        for group_id in request.body["groups"]:
            group = self.groups.get(group_id) or Group(group_id)
            stable = group.state is GroupState.STABLE
            known = group_id in with_offsets or group.pending  # an offered id: it exists
            idle = GroupState.EMPTY.value if known else "Dead"
            described.append(
                {
                    "error_code": NONE,
                    "group_id": group_id,
                    "group_state": group.state.value if group.members else idle,
                    "protocol_type": group.protocol_type,
                    "protocol_data": group.protocol_name or "",
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": "",
                            "member_metadata": dict(m.protocols).get(
                                group.protocol_name or "", b""
                            ),
                            "member_assignment": m.assignment if stable else b"",
                        }
                        for m in group.members.values()
                    ],
                }
            )
        return {"groups": described}

    def list_groups(self, request: Request, with_offsets: Collection[str] = ()) -> Plain:
        """Every group with members or ids offered to joiners, and every group that holds
        committed offsets (``with_offsets``, the engine's store) though none of its members is
        here: Kafka lists those Empty groups too, and tools find a group's offsets through
        them. v4+ gives each
        group's state and keeps those ``states_filter`` names (KIP-518); v5+ its type, always
        ``classic`` here, and keeps those ``types_filter`` names (KIP-848); both filters match
        without regard to case, as Kafka's, and an empty one keeps every group."""
        listed = {
            g.group_id: (g.protocol_type, g.state.value)
            for g in self.groups.values()
            if g.members or g.pending  # offered ids only: Empty, as Kafka lists it
        }
        for group_id in with_offsets:
            group = self.groups.get(group_id)
            protocol_type = group.protocol_type if group else ""
            listed.setdefault(group_id, (protocol_type, GroupState.EMPTY.value))
        states = {state.lower() for state in request.body.get("states_filter") or ()}
        types = {kind.lower() for kind in request.body.get("types_filter") or ()}
        if types and CLASSIC_GROUP_TYPE.lower() not in types:
            listed = {}
        return {
            "error_code": NONE,
            "groups": [
                {
                    "group_id": group_id,
                    "protocol_type": protocol_type,
                    "group_state": state,
                    "group_type": CLASSIC_GROUP_TYPE,
                }
                for group_id, (protocol_type, state) in sorted(listed.items())
                if not states or state.lower() in states
            ],
        }


def _join_answer(group: Group, member: Member) -> Plain:
    """The JoinGroup answer of the current generation to ``member``: the leader gets every
    member's metadata for the protocol chosen (static members with their instance ids)."""
    everyone = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "metadata": dict(m.protocols).get(group.protocol_name or "", b""),
        }
        for m in group.members.values()
    ]
    return {
        "error_code": NONE,
        "generation_id": group.generation_id,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "leader": group.leader,
        "member_id": member.member_id,
        "members": everyone if member.member_id == group.leader else [],
    }


def _rebalance_timeout_ms(group: Group) -> int:
    """The group's rebalance timeout: the longest its members asked for (Kafka's)."""
    return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)


def _stop_sync_deadline(group: Group) -> None:
    if group.sync_deadline is not None:
        group.sync_deadline.cancel()
        group.sync_deadline = None


def _forgettable(group: Group) -> bool:
    """Whether ``group`` holds nothing worth keeping: no member, no offered id, no round.
    Its generation need not survive (a member id of an earlier generation is a random one no
    later member gets), and its offsets are the engine's, not this object's."""
    return (
        group.state is GroupState.EMPTY
        and not group.members
        and not group.pending
        and group.round_deadline is None
    )


def _parked(call: asyncio.Future[Plain] | None) -> bool:
    """Whether a member's JoinGroup or SyncGroup is waiting for its answer."""
    return call is not None and not call.done()


def _join_error(code: int, member_id: str) -> Plain:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": "",
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def _common_protocol(group: Group) -> str:
    """The leader's first protocol that every member supports (Kafka picks by votes; with one
    client library in a group the leader's preference is everyone's)."""
    members = list(group.members.values())
    leader = group.members[group.leader] if group.leader in group.members else members[0]
    for name, _ in leader.protocols:
        if all(name in dict(m.protocols) for m in members):
            return name
    return leader.protocols[0][0] if leader.protocols else ""
