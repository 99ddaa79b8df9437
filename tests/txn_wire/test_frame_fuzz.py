"""Issue 24: a fuzz of frames against real ``txnlog serve`` processes.

For every (api_key, version) the server advertises, a valid request with every field filled
(``frame_samples``), then that request with each of its length, count, string-length and
tagged-field fields (``frame_bounds.field_map``) set to each extreme: null, negative,
2**31-1, 2**32-2, the largest 5-byte varint, one more than fits, an overlong varint; plus
random overwrites of random requests with such bytes anywhere. Each frame goes on a fresh
connection, in three modes: a server without SASL; a SASL server before authentication; the
same server after a PLAIN login. Versions kio has no schema for get a header and a huge count.

Afterwards each server must be alive, answer ApiVersions and Metadata normally, and its peak
RSS (VmHWM) must stay under ``RSS_BOUND_MB``. The figures are printed (``-s`` shows them).
``TXNLOG_FAULT_SCALE`` (``make faults``) multiplies the random frames; ``TXNLOG_TEST_SEED``
replays them.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.txn_wire.auth_clients import plain_login, write_users
from tests.txn_wire.frame_samples import (
    advertised,
    has_schema,
    mutations,
    sample_frame,
)
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_wire.codec import LENGTH

SCALE = int(os.environ.get("TXNLOG_FAULT_SCALE", "1"))
RANDOM_FRAMES = 300 * SCALE  # per mode, besides every length field at every extreme
RSS_BOUND_MB = 400
ANSWER_WAIT_S = 10  # a frame is answered or its connection closed well within this
PATTERNS = (b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff")
USERS = {"fuzzer": "fuzz-secret"}


@dataclass
class Tally:
    """What one mode's frames got: an answer, a closed connection, or nothing in time."""

    outcomes: Counter[str] = field(default_factory=Counter)
    slow: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(self.outcomes.values())


def fuzz_frames(sasl: bool, seed: int) -> Iterator[tuple[str, bytes]]:
    """(description, length-prefixed frame) for one mode."""
    decodable = [(k, v) for k, v in advertised(sasl=sasl) if has_schema(k, v)]
    for key, version in advertised(sasl=sasl):
        if (key, version) not in decodable:
            body = struct.pack(">hhih", key, version, 1, -1) + b"\xff\xff\xff\xff\x0f"
            yield f"api {key} v{version} (no kio schema)", LENGTH.pack(len(body)) + body
    for key, version in decodable:
        for mutation in mutations(key, version):
            yield mutation.describe(), mutation.frame
    rng = random.Random(seed)
    for _ in range(RANDOM_FRAMES):
        key, version = rng.choice(decodable)
        body = sample_frame(key, version)[LENGTH.size :]
        at, pattern = rng.randrange(8, len(body)), rng.choice(PATTERNS)
        body = body[:at] + pattern + body[at + len(pattern) :]
        yield f"api {key} v{version} {pattern.hex()} at {at}", LENGTH.pack(len(body)) + body


def send_one(port: int, frame: bytes, login: bool) -> str:
    """Send ``frame`` on a fresh connection (after a PLAIN login if ``login``), end our side,
    and read until the server closes: "answered", "closed" (nothing back) or "slow"."""
    client = plain_login(port, "fuzzer", "fuzz-secret") if login else RawClient(port)
    sock = client.sock
    sock.settimeout(ANSWER_WAIT_S)
    try:
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        received = 0
        while chunk := sock.recv(65536):
            received += len(chunk)
        return "answered" if received else "closed"
    except TimeoutError:
        return "slow"
    except ConnectionError:
        return "closed"
    finally:
        sock.close()


def fuzz(served: ServeProcess, *, sasl: bool, login: bool, seed: int) -> Tally:
    tally = Tally()
    for what, frame in fuzz_frames(sasl, seed):
        outcome = send_one(served.port, frame, login)
        tally.outcomes[outcome] += 1
        if outcome == "slow":
            tally.slow.append(what)
        if served.process.poll() is not None:
            raise AssertionError(f"txnlog serve died (exit {served.process.returncode}) on {what}")
    return tally


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of ``pid``, in MB."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            figures[name] = int(value.split()[0]) / 1024
    return figures


def check_answers_normally(served: ServeProcess, login: bool) -> None:
    client = plain_login(served.port, "fuzzer", "fuzz-secret") if login else RawClient(served.port)
    versions = client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    metadata = client.request(3, 12, {"topics": [{"name": "orders"}]})
    client.close()
    assert versions["error_code"] == 0
    [topic] = metadata["topics"]
    assert (topic["name"], topic["error_code"], len(topic["partitions"])) == ("orders", 0, 2)


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("TXNLOG_TEST_SEED", random.randrange(2**32)))
    print(f"TXNLOG_TEST_SEED={value}")
    return value


@pytest.mark.fault
@pytest.mark.parametrize("sasl", [False, True], ids=["open", "sasl"])
def test_no_frame_kills_the_server_or_its_memory(tmp_path: Path, seed: int, sasl: bool) -> None:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
    extra = ("--users-file", str(write_users(tmp_path / "users.json", USERS))) if sasl else ()
    with open(tmp_path / "serve.stderr", "w") as stderr:
        served = start_serve(path, *extra, stderr=stderr)
    try:
        check_answers_normally(served, login=sasl)
        before = memory_mb(served.process.pid)
        modes = [("unauthenticated", False), ("authenticated", True)] if sasl else [("open", False)]
        for mode, login in modes:
            started = time.monotonic()
            tally = fuzz(served, sasl=sasl, login=login, seed=seed)
            took = time.monotonic() - started
            print(f"{mode}: {tally.sent} frames in {took:.1f} s: {dict(tally.outcomes)}")
            assert not tally.slow, (
                f"{mode}: no answer nor close within {ANSWER_WAIT_S} s: {tally.slow}"
            )
        check_answers_normally(served, login=sasl)
        after = memory_mb(served.process.pid)
        print(f"server memory MB before {before}, after {after}")
        assert after["VmHWM"] < RSS_BOUND_MB, f"peak RSS {after['VmHWM']:.0f} MB"
    finally:
        exit_code = served.stop()
    assert exit_code == 0, f"txnlog serve exited {exit_code} when stopped"
    handler_errors = dict(logged_errors((tmp_path / "serve.stderr").read_text()))
    print(f"handler errors the server logged (each closed its connection): {handler_errors}")


def logged_errors(stderr: str) -> Counter[str]:
    """The last line of each traceback in the server's stderr: the error, by kind."""
    errors: Counter[str] = Counter()
    for block in stderr.split("Traceback (most recent call last):")[1:]:
        lines = [line for line in block.splitlines() if line and not line.startswith(" ")]
        if lines:
            errors[lines[0].split(":")[0]] += 1
    return errors
