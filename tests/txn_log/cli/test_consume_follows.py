"""``txnlog consume`` follows its topic until Ctrl-C, as ``kafka-console-consumer`` does
(issue 26 item 5: it used to return at once, ``--timeout-ms`` defaulting to 0); SIGINT ends it
with the summary and exit status 0, no traceback; ``--timeout-ms`` and ``--max-messages`` stop
it earlier. A record committed at any moment of the follow is printed.

The processes run with ``-X faulthandler``: a wait that runs out aborts the process (SIGABRT),
which then writes every thread's stack to its stderr, and the test fails showing them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from txn_log.cli import build_parser
from txn_log.cli.clients import follow
from txn_log.log import Log

HANG_S = 60
"""How long a wait for the command may last before the test calls it a hang: far beyond
anything a healthy run takes, even on two cores under load 8."""


def start_consume(path: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-X", "faulthandler", "-m", "txn_log.cli", "consume"]
    command += [str(path), "orders", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_line(consume: subprocess.Popen[str]) -> str:
    """The next line ``consume`` prints; if none comes within HANG_S, it is aborted and the
    test fails with its threads' stacks."""
    assert consume.stdout is not None
    watchdog = threading.Timer(HANG_S, consume.send_signal, (signal.SIGABRT,))
    watchdog.start()
    try:
        line = consume.stdout.readline()
    finally:
        watchdog.cancel()
    if not line.endswith("\n"):
        _, err = consume.communicate(timeout=HANG_S)
        raise AssertionError(
            f"consume printed no line within {HANG_S} s ({line!r}, exit {consume.returncode}); "
            f"its stderr:\n{err}"
        )
    return line


def finish(consume: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    """(stdout, stderr) of ``consume`` once it exits; if it does not within ``timeout_s``, it is
    aborted and the test fails with its threads' stacks."""
    try:
        return consume.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        consume.send_signal(signal.SIGABRT)
        out, err = consume.communicate(timeout=HANG_S)
        raise AssertionError(
            f"consume did not exit within {timeout_s} s; stdout {out!r}, stderr:\n{err}"
        ) from None


def produce(path: Path, *values: bytes) -> None:
    log = Log.open(path)
    try:
        producer = log.producer()
        for value in values:
            producer.send("orders", value)
        producer.flush()
    finally:
        log.close()


def test_consume_follows_until_ctrl_c_and_exits_0_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "log"
    Log.open(path).create_topic("orders", partitions=1)
    produce(path, b"before")
    consume = start_consume(path, "--from-beginning")
    try:
        assert read_line(consume) == "before\n"
        produce(path, b"after")  # it is still reading
        assert read_line(consume) == "after\n"
        time.sleep(0.5)
        assert consume.poll() is None, "consume returned instead of following the topic"
        consume.send_signal(signal.SIGINT)
        out, err = finish(consume, 30)
    finally:
        if consume.poll() is None:
            consume.kill()
    assert consume.returncode == 0, err
    assert out == "" and err == "Processed a total of 2 message(s).\n"


def test_timeout_and_max_messages_stop_it(tmp_path: Path) -> None:
    path = tmp_path / "log"
    Log.open(path).create_topic("orders", partitions=1)
    produce(path, b"a", b"b", b"c")
    idle = start_consume(path, "--from-beginning", "--timeout-ms", "200")
    counted = start_consume(path, "--from-beginning", "--max-messages", "2")
    assert finish(idle, 60) == ("a\nb\nc\n", "Processed a total of 3 message(s).\n")
    assert finish(counted, 60) == ("a\nb\n", "Processed a total of 2 message(s).\n")
    assert idle.returncode == counted.returncode == 0


class PeerCommitsAfterEachCall:
    """The follow loop's consumer (a real one), with a peer (another ``Log`` of the same
    directory, as another process would be) committing the next of ``values`` right after
    each call to it returns: so a record lands at every point between two of the loop's
    reads and end lookups."""

    def __init__(self, consumer: Any, peer: Log, values: list[bytes]) -> None:
        self._consumer = consumer
        self._producer = peer.producer()
        self._values = values

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._consumer, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if self._values:
                self._producer.send("orders", self._values.pop(0))
                self._producer.flush()
            return result

        return call


def test_a_record_committed_between_two_calls_of_the_follow_loop_is_printed(
    tmp_path: Path,
) -> None:
    # The loop once moved a partition's position to an end it read after the read: a record
    # committed in between was never printed (and the follow test waited for it forever).
    path = tmp_path / "log"
    Log.open(path).create_topic("orders", partitions=1)
    values = [f"v{i}".encode() for i in range(20)]
    with Log.open(path) as log, Log.open(path) as peer:
        consumer = log.consumer("read_committed")
        positions = {tp: consumer.end_offset(tp) for tp in log.partitions("orders")}
        args = build_parser().parse_args(["consume", str(path), "orders", "--timeout-ms", "500"])
        peer_consumer = PeerCommitsAfterEachCall(consumer, peer, list(values))
        lines = list(follow(args, peer_consumer, positions, threading.Event()))
    assert lines == [value.decode() for value in values]
