"""``txnlog consume`` follows its topic until Ctrl-C, as ``kafka-console-consumer`` does
(issue 26 item 5: it used to return at once, ``--timeout-ms`` defaulting to 0); SIGINT ends it
with the summary and exit status 0, no traceback; ``--timeout-ms`` and ``--max-messages`` stop
it earlier. A record committed at any moment of the follow is printed; Ctrl-C at any line of
the follow loop ends it.

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
from txn_log.cli.clients import CtrlC, follow
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
        lines = list(follow(args, peer_consumer, positions, CtrlC()))
    assert lines == [value.decode() for value in values]


# Run in a child process: for k = 1..lines, ``txnlog consume`` (``main``) follows a topic with
# one record and gets SIGINT at the k-th line it runs in the follow loop (its own code and the
# library code it waits in, not the log's), handled right there; each must end with exit 0.
# A run that does not end within 60 s dumps every thread's stack and exits 1.
CTRL_C_AT_EVERY_LINE = r"""
import contextlib, faulthandler, io, signal, sys
from pathlib import Path
import txn_log
from txn_log.cli import clients, main

ENGINE = str(Path(txn_log.__file__).parent)
path, lines = sys.argv[1], int(sys.argv[2])


def run_with_ctrl_c_at(k):
    traced, seen = set(), 0

    def tracer(frame, event, arg):
        nonlocal seen
        if event == "call":
            code = frame.f_code
            if code.co_filename == clients.__file__:
                if code.co_name == "follow" and not seen:
                    seen = 1  # the handler is in place: count lines from here
            elif frame.f_back not in traced or code.co_filename.startswith(ENGINE):
                return None
            traced.add(frame)
        elif event == "line" and seen and frame in traced:
            seen += 1
            if seen == k + 1:
                signal.raise_signal(signal.SIGINT)
        return tracer

    out, err = io.StringIO(), io.StringIO()
    faulthandler.dump_traceback_later(60, exit=True, file=sys.__stderr__)
    sys.settrace(tracer)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["consume", path, "orders", "--from-beginning"])
    finally:
        sys.settrace(None)
        faulthandler.cancel_dump_traceback_later()
    if code != 0 or seen <= k or not err.getvalue().startswith("Processed a total of"):
        sys.exit(f"SIGINT at line {k}: exit {code}, {seen - 1} lines, stderr {err.getvalue()!r}")


for k in range(1, lines + 1):
    run_with_ctrl_c_at(k)
print(f"{lines} runs ended")
"""


def test_ctrl_c_at_any_line_of_the_follow_loop_ends_it(tmp_path: Path) -> None:
    # The SIGINT handler once set a threading.Event, whose set() takes the lock Event.wait
    # holds: a SIGINT handled inside the loop's wait left the process waiting for itself.
    path = tmp_path / "log"
    Log.open(path).create_topic("orders", partitions=1)
    produce(path, b"before")
    lines = 60  # the first round (about 30 lines), its wait, and the next round
    command = [sys.executable, "-c", CTRL_C_AT_EVERY_LINE, str(path), str(lines)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert (done.returncode, done.stdout) == (0, f"{lines} runs ended\n"), done.stderr
