"""Which groups have members across processes (``group_activity``): a holder process's shared
lock makes every tool refuse the group at once, several holders may share it, a SIGKILLed
holder leaves nothing behind, a tool holding the group keeps every holder out, and tools take
turns on a group instead of refusing each other."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.txn_log.processes.test_multiprocess import ROOT
from txn_log.errors import GroupNotEmptyError
from txn_log.group.group_activity import GroupActivity
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

WAIT_S = 30
HOLDER = (
    "import sys\n"
    "from txn_log.group.group_activity import GroupActivity\n"
    "activity = GroupActivity(sys.argv[1])\n"
    "print(activity.hold(sys.argv[2]), flush=True)\n"
    "sys.stdin.read()\n"
)


def holder(path: Path, group: str) -> subprocess.Popen[str]:
    """A process that holds ``group`` (as a server with members) until its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), group],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "True"
    return process


def test_a_holder_in_another_process_makes_tools_refuse_until_it_is_gone(tmp_path: Path) -> None:
    with Log.open(tmp_path / "log") as log:
        log.create_topic("orders", 1)
        log.group_offsets.commit("g", {TopicPartition("orders", 0): 3})
        activity = log.group_offsets.activity
        first, second = holder(log.path, "g"), holder(log.path, "g")  # two servers at once
        assert activity.is_active("g") and not activity.is_active("other")
        with pytest.raises(GroupNotEmptyError, match="'g' has active members"):
            log.group_offsets.delete_group("g")
        with pytest.raises(GroupNotEmptyError):
            log.group_offsets.reset_offsets("g", lambda current: {TopicPartition("orders", 0): 0})
        first.communicate("")
        assert activity.is_active("g")  # the second still holds it
        second.send_signal(signal.SIGKILL)
        second.wait()
        assert not activity.is_active("g")  # the kernel dropped the dead holder's lock
        assert log.group_offsets.delete_group("g") == [TopicPartition("orders", 0)]
        assert "g" not in log.group_offsets.groups()


def test_a_tool_holding_the_group_keeps_holders_out(tmp_path: Path) -> None:
    activity, server = GroupActivity(tmp_path), GroupActivity(tmp_path)
    with activity.inactive("g"):
        assert not server.hold("g")
    assert server.hold("g") and server.hold("g")  # held: holding again is a no-op
    server.release("g")
    assert not activity.is_active("g")


def test_tools_take_turns_and_never_mistake_each_other_for_members(tmp_path: Path) -> None:
    """A tool holding a group inactive makes a second tool wait for its turn (the editor
    lock), not refuse as if the group had members; a probe waits likewise."""
    first, second = GroupActivity(tmp_path), GroupActivity(tmp_path)
    inside, release, order = threading.Event(), threading.Event(), []

    def hold_a_while() -> None:
        with first.inactive("g"):
            inside.set()
            release.wait(WAIT_S)
            order.append("first done")

    def take_a_turn() -> None:
        with second.inactive("g"):
            order.append("second in")

    holder_thread = threading.Thread(target=hold_a_while)
    holder_thread.start()
    assert inside.wait(WAIT_S)
    waiter = threading.Thread(target=take_a_turn)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and order == []  # waiting for its turn, not refused
    release.set()
    holder_thread.join(WAIT_S)
    waiter.join(WAIT_S)
    assert order == ["first done", "second in"]
    assert not second.is_active("g")
