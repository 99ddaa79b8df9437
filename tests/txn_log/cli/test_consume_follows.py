"""``txnlog consume`` follows its topic until Ctrl-C, as ``kafka-console-consumer`` does
(issue 26 item 5: it used to return at once, ``--timeout-ms`` defaulting to 0); SIGINT ends it
with the summary and exit status 0, no traceback; ``--timeout-ms`` and ``--max-messages`` stop
it earlier."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from txn_log.log import Log


def start_consume(path: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "txn_log.cli", "consume", str(path), "orders", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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
        assert consume.stdout is not None
        assert consume.stdout.readline() == "before\n"
        produce(path, b"after")  # it is still reading
        assert consume.stdout.readline() == "after\n"
        time.sleep(0.5)
        assert consume.poll() is None, "consume returned instead of following the topic"
        consume.send_signal(signal.SIGINT)
        out, err = consume.communicate(timeout=30)
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
    assert idle.communicate(timeout=60) == ("a\nb\nc\n", "Processed a total of 3 message(s).\n")
    assert counted.communicate(timeout=60) == ("a\nb\n", "Processed a total of 2 message(s).\n")
    assert idle.returncode == counted.returncode == 0
