"""Exactly once through ``txnlog serve`` with unmodified confluent-kafka clients (issue 15):
consume-transform-produce copiers, each its own OS process, in one consumer group
(``subscribe()``, read_committed), copy the input topic to the output topic in transactions
that carry their consumed positions (``send_offsets_to_transaction``, R-06..R-10), aborting
one transaction in three. A third member joins halfway, forcing a rebalance while the group
is copying. At the end a read_committed read of the output, over the wire and through the
engine, holds every committed input record exactly once, none of the aborted input, and the
group's committed offsets are the input's ends."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.txn_wire.mixed_transactions import confluent_rows, engine_rows, log_ends
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S
from txn_log.log import Log

INPUT_PARTITIONS = 4


@pytest.fixture
def copier_server(tmp_path: Path) -> Iterator[ServeProcess]:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("input", INPUT_PARTITIONS)
        log.create_topic("output", 2)
    served = start_serve(path)
    try:
        yield served
    finally:
        served.stop()


class Copier:
    """One copier process; its stdout lines collected by a thread."""

    def __init__(
        self, server: ServeProcess, name: str, stop_file: Path, crash_file: Path | None = None
    ) -> None:
        self.name = name
        crash = [] if crash_file is None else [str(crash_file)]
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.txn_wire.copier_process",
                server.bootstrap,
                name,
                str(stop_file),
                *crash,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def assignments(self) -> list[set[int]]:
        return [
            {int(p) for p in line.split(" ", 1)[1].split(",") if p}
            for line in self.lines
            if line.startswith("assigned")
        ]

    def finish(self) -> tuple[int, int]:
        """Wait for the process to exit after the stop file; its (committed, aborted) counts."""
        self.process.wait(WAIT_S)
        self._reader.join(WAIT_S)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        if self.process.returncode != 0:
            raise AssertionError(f"copier {self.name} exited {self.process.returncode}: {stderr}")
        done = [line for line in self.lines if line.startswith("done ")]
        counts = dict(part.split("=") for part in done[-1].split()[1:])
        return int(counts["committed"]), int(counts["aborted"])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT_S)


def write_input(path: Path, round_: int) -> list[bytes]:
    """Engine transactions into every input partition: three committed, one aborted. Returns
    the committed values."""
    committed: list[bytes] = []
    with Log.open(path) as log:
        producer = log.producer(f"input-writer-{round_}")
        producer.init_transactions()
        for txn in range(4):
            commit = txn != 2
            producer.begin_transaction()
            for i in range(40):
                value = f"in-{round_}-{txn}-{i}-{'c' if commit else 'a'}".encode()
                producer.send("input", value, key=value[:12], partition=i % INPUT_PARTITIONS)
                if commit:
                    committed.append(value)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    return committed


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


def output_values(path: Path) -> list[bytes]:
    return [row[4] or b"" for row in engine_rows(path, "output", "read_committed")]


def wait_for_group_offsets_at_the_end(path: Path) -> None:
    """Until the group's committed offset on each input partition is past the partition's last
    committed record (a position may stop at the marker after it) and within the log."""
    last_records = {}
    for _, partition, offset, _, _ in engine_rows(path, "input", "read_committed"):
        last_records[partition] = offset
    ends = log_ends(path, "input")

    def all_committed() -> bool:
        with Log.open(path) as log:
            got = log.committed("copiers", log.partitions("input"))
        offsets = {tp.partition: om.offset for tp, om in got.items() if om}
        return len(offsets) == INPUT_PARTITIONS and all(
            last_records[p] < offset <= ends[p] for p, offset in offsets.items()
        )

    wait_for(all_committed, "the group's offsets past every committed input record")


def read_committed_output(server: ServeProcess) -> tuple[list[bytes], list[bytes]]:
    """The output's committed values through the engine and over the wire (confluent-kafka)."""
    over_the_engine = output_values(server.path)
    over_the_wire = confluent_rows(server.bootstrap, server.path, "output", "read_committed")
    return over_the_engine, [row[4] or b"" for row in over_the_wire]


def test_copiers_in_a_rebalancing_group_copy_every_record_exactly_once_R06_R10(
    copier_server: ServeProcess, tmp_path: Path
) -> None:
    path = copier_server.path
    stop_file = tmp_path / "stop"
    expected = write_input(path, 0)
    copiers = [Copier(copier_server, name, stop_file) for name in ("a", "b")]
    try:
        wait_for(lambda: len(output_values(path)) >= len(expected), "the first half copied")
        two = [c.assignments()[-1] for c in copiers]
        assert sorted(p for a in two for p in a) == list(range(INPUT_PARTITIONS))

        third = Copier(copier_server, "c", stop_file)  # joins: the group rebalances
        copiers.append(third)

        def split_three_ways() -> bool:
            current = [c.assignments()[-1] if c.assignments() else set() for c in copiers]
            covered = sorted(p for a in current for p in a)
            return all(current) and covered == list(range(INPUT_PARTITIONS))

        wait_for(split_three_ways, "the partitions split among three members")
        expected += write_input(path, 1)  # copied by three members, one of them new
        wait_for_group_offsets_at_the_end(path)
        stop_file.touch()
        counts = {c.name: c.finish() for c in copiers}
    finally:
        stop_file.touch()
        for copier in copiers:
            copier.kill()

    assert counts["c"][0] >= 1  # the member that joined halfway copied in a transaction
    assert all(aborted >= 1 for _, aborted in counts.values())  # ~ one transaction in three
    assert len(copiers[0].assignments()) >= 2  # a member already there was reassigned

    over_the_engine, over_the_wire = read_committed_output(copier_server)
    assert Counter(over_the_engine) == Counter(expected)  # each exactly once, no aborted input
    assert Counter(over_the_wire) == Counter(expected)


def test_a_copier_killed_mid_transaction_is_replaced_and_nothing_is_lost_or_doubled(
    copier_server: ServeProcess, tmp_path: Path
) -> None:
    """Copier a is SIGKILLed inside a transaction (its records produced and acked, its
    offsets sent, no commit): the output's LSO is pinned by that open transaction. A new
    process with the same transactional id fences it and aborts it (E-03, C-25's alternative:
    no waiting for the timeout); the group moves a's partitions once its session expires or the
    new a joins. Every committed input record still reaches the output exactly once."""
    path = copier_server.path
    stop_file, crash_file = tmp_path / "stop", tmp_path / "crash"
    expected = write_input(path, 0)
    doomed = Copier(copier_server, "a", stop_file, crash_file)
    copiers = [doomed, Copier(copier_server, "b", stop_file)]
    try:
        wait_for(lambda: len(output_values(path)) >= len(expected), "the first round copied")
        crash_file.touch()
        expected += write_input(path, 1)
        doomed.process.wait(WAIT_S)
        assert doomed.process.returncode == -signal.SIGKILL
        assert any(line.startswith("crashing") for line in doomed.lines)
        with Log.open(path) as log:  # the killed transaction is open: it pins an LSO
            pinned = [
                tp.partition
                for tp in log.partitions("output")
                if log.partition_reader(tp).last_stable_offset
                < log.partition_reader(tp).log_end_offset
            ]
        assert pinned

        copiers.append(Copier(copier_server, "a", stop_file))  # same transactional id
        wait_for_group_offsets_at_the_end(path)
        stop_file.touch()
        for copier in copiers[1:]:
            copier.finish()
    finally:
        stop_file.touch()
        for copier in copiers:
            copier.kill()

    over_the_engine, over_the_wire = read_committed_output(copier_server)
    assert Counter(over_the_engine) == Counter(expected)
    assert Counter(over_the_wire) == Counter(expected)
